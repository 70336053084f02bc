"""The mixed model of restart-bound measurements: moderated variances, REML, GLS, benches."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ddtune.stats.mixed import (
    Component,
    Components,
    Priors,
    StartMean,
    VariancePrior,
    benches_per_start,
    decision_chance,
    estimate_components,
    fit_effects,
    start_means,
    within_variance,
)

PRIORS = Priors(VariancePrior(0.03, 2), VariancePrior(0.03, 10), VariancePrior(0.01, 2))


def test_within_variance_is_the_pooled_spread_moderated_by_the_prior():
    groups = [[0.0, 0.1], [1.0, 1.2, 1.4], [5.0]]  # SS 0.005 + 0.08, df 1 + 2
    c = within_variance(groups, VariancePrior(0.1, 2))
    assert c.df == 5
    assert c.var == pytest.approx((2 * 0.01 + 0.085) / 5)


def test_without_a_second_start_the_priors_hold():
    starts = [StartMean(label, 0.1 * i, 2, i / 10) for i, label in enumerate("abc")]
    c = estimate_components(starts, [[0.0, 0.0]], PRIORS)
    assert c.start.var == pytest.approx(0.03**2) and c.start.df == 10
    assert c.drift.var == pytest.approx(0.01**2)


def test_reml_recovers_a_start_variance_larger_than_the_prior():
    rng = np.random.default_rng(0)
    starts = [
        StartMean(f"c{c}", 0.2 * c + float(rng.normal(0, 0.06)), 4, 0.1 * (4 * c + s))
        for c in range(20)
        for s in range(4)
    ]
    c = estimate_components(starts, [[0.0, 0.0]] * 40, PRIORS)
    # 60 df of data at 6% against 10 df of prior at 3%: between them, near the data
    assert 0.045 < c.start.sd < 0.07
    assert c.start.df == 10 + 60


def test_the_drift_term_takes_a_steady_trend_out_of_the_comparison():
    """a and b are equal; b is always measured an hour after a while the machine slows 3%/h."""
    starts = []
    for k in range(6):
        for label, t in (("a", 2.0 * k), ("b", 2.0 * k + 1.0)):
            starts.append(StartMean(label, -0.03 * t, 3, t))
    components = estimate_components(starts, [[0.0, 0.001]] * 12, PRIORS)
    fit = fit_effects(starts, components)
    naive = (
        math.fsum(s.log_mean for s in starts if s.label == "a") / 6
        - math.fsum(s.log_mean for s in starts if s.label == "b") / 6
    )
    assert naive == pytest.approx(0.03)  # one hour of drift read as a 3% effect
    assert abs(fit.contrast("a", "b").log_estimate) < 0.01  # the drift model sees it as drift
    assert components.drift.sd > 0.01  # ... and says the machine moves more than the prior


def test_contrast_is_a_ratio_interval_with_the_start_df():
    starts = [StartMean("a", 0.05, 4, 0.0), StartMean("b", 0.0, 4, 0.1)]
    components = Components(Component(0.0004, 20), Component(0.0004, 12), Component(1e-8, 2))
    ratio = fit_effects(starts, components).contrast("a", "b")
    assert ratio.method == "mixed" and ratio.df == 12
    assert ratio.log_estimate == pytest.approx(0.05)
    assert ratio.se == pytest.approx(math.sqrt(2 * (0.0004 + 0.0004 / 4)), rel=1e-3)


@pytest.mark.parametrize(
    ("bench_var", "start_var", "start_s", "bench_s", "expected"),
    [
        (0.03**2, 0.03**2, 480, 75, 3),  # sqrt(6.4) = 2.5
        (0.01**2, 0.03**2, 480, 75, 1),  # benches are precise: restart instead
        (0.10**2, 0.01**2, 8, 0.6, 4),  # noisy benches, cheap ones: the most allowed
        (0.03**2, 0.03**2, 1, 1, 1),
    ],
)
def test_benches_per_start(bench_var, start_var, start_s, bench_s, expected):
    components = Components(Component(bench_var, 10), Component(start_var, 10), Component(1e-4, 2))
    assert benches_per_start(components, start_s, bench_s, most=4) == expected


def test_the_chance_of_a_verdict_is_certain_without_more_data_and_grows_with_it():
    margin = math.log1p(0.03)
    assert decision_chance(0.10, 0.04, 0.04, margin, 0.02) == 1.0  # beyond 2.33 se: separated
    assert decision_chance(0.08, 0.04, 0.04, margin, 0.02) == 0.0  # neither, and no more data
    few, many = (decision_chance(0.08, 0.10, then, margin, 0.02) for then in (0.08, 0.02))
    assert few < 0.1 < 0.9 < many  # 0.1: the race's futility line
    assert decision_chance(0.0, 0.05, 0.004, margin, 0.02) > 0.9  # equivalent, once precise


def test_start_means_average_each_start_and_skip_empty_ones():
    means, logs = start_means([("a", [(0.1, 1.0), (0.3, 3.0)]), ("a", []), ("b", [(0.5, 2.0)])])
    assert means == [StartMean("a", 0.2, 2, 2.0), StartMean("b", 0.5, 1, 2.0)]
    assert logs == [[0.1, 0.3], [0.5]]
