"""Statistics checked against hand-computed and textbook values."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats

from ddtune.stats.intervals import (
    fisher_exact_two_sided,
    mean_ci,
    ratio_ci,
    required_repeats,
    welch_difference,
    wilson_interval,
)


def test_mean_ci_small_sample_matches_hand_computation():
    # [1, 2, 3, 4]: mean 2.5, s = 1.290994, t(0.975, 3) = 3.182446 -> half = 2.054260
    ci = mean_ci([1.0, 2.0, 3.0, 4.0])
    assert ci.mean == pytest.approx(2.5)
    assert ci.sd == pytest.approx(1.290994, abs=1e-6)
    assert ci.low == pytest.approx(0.445740, abs=1e-5)
    assert ci.high == pytest.approx(4.554260, abs=1e-5)
    assert ci.n == 4 and ci.has_interval


def test_mean_ci_single_value_has_no_interval():
    ci = mean_ci([170.0])
    assert ci.mean == 170.0
    assert ci.low is None and ci.high is None and ci.sd is None
    assert not ci.has_interval


def test_mean_ci_rejects_empty():
    with pytest.raises(ValueError):
        mean_ci([])


def test_wilson_four_of_five_textbook():
    low, high = wilson_interval(4, 5)
    assert low == pytest.approx(0.3755, abs=1e-4)
    assert high == pytest.approx(0.9638, abs=1e-4)


def test_wilson_extremes_stay_in_unit_interval():
    low, high = wilson_interval(0, 10)
    assert low == 0.0
    assert high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson_interval(5, 5)
    assert high == 1.0
    assert low == pytest.approx(0.5655, abs=1e-4)


def test_wilson_rejects_bad_counts():
    with pytest.raises(ValueError):
        wilson_interval(6, 5)
    with pytest.raises(ValueError):
        wilson_interval(0, 0)


def test_fisher_four_of_five_vs_five_of_five_is_one():
    assert fisher_exact_two_sided(4, 5, 5, 5) == pytest.approx(1.0)


def test_fisher_lady_tasting_tea():
    # Fisher's tea-tasting table [[3, 1], [1, 3]]: two-sided p = 34/70
    assert fisher_exact_two_sided(3, 4, 1, 4) == pytest.approx(34 / 70)


def test_fisher_separates_large_difference():
    assert fisher_exact_two_sided(20, 20, 5, 20) < 1e-5


def test_welch_difference_matches_hand_and_scipy():
    a, b = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]
    diff = welch_difference(a, b)
    # va = 1/3, vb = 1.6667/4; df = (va+vb)^2 / (va^2/2 + vb^2/3) = 4.959
    assert diff.estimate == pytest.approx(-3.5)
    assert diff.df == pytest.approx(4.959184, abs=1e-5)
    assert diff.p_value == pytest.approx(stats.ttest_ind(a, b, equal_var=False).pvalue)
    assert diff.separated and diff.high < 0


def test_welch_difference_single_repeat_cannot_separate():
    diff = welch_difference([149.0], [170.0])
    assert diff.estimate == pytest.approx(-21.0)
    assert diff.low is None and not diff.separated


def test_ratio_ci_with_constant_denominator_reduces_to_scaled_t_interval():
    # b constant at 5 -> interval is (11 ± t(0.975, 1)·1)/5 = (11 ± 12.7062)/5
    ci = ratio_ci([10.0, 12.0], [5.0, 5.0])
    assert ci.mean == pytest.approx(2.2)
    assert ci.low == pytest.approx(-0.341241, abs=1e-5)
    assert ci.high == pytest.approx(4.741241, abs=1e-5)


def test_ratio_ci_single_repeat_has_no_interval():
    ci = ratio_ci([150.0], [100.0])
    assert ci.mean == pytest.approx(1.5) and ci.low is None


def test_ratio_ci_unbounded_when_denominator_is_noisy():
    # denominator mean not clearly away from zero -> Fieller set is unbounded
    ci = ratio_ci([10.0, 11.0, 12.0], [-1.0, 0.5, 2.0])
    assert ci.low is None and ci.high is None


def test_ratio_ci_coverage_is_near_nominal():
    rng = random.Random(7)
    true_ratio, hits, trials = 1.5, 0, 2000
    for _ in range(trials):
        num = [rng.gauss(150.0, 6.0) for _ in range(4)]
        den = [rng.gauss(100.0, 5.0) for _ in range(4)]
        ci = ratio_ci(num, den)
        hits += ci.low <= true_ratio <= ci.high
    assert 0.93 <= hits / trials <= 0.97


@pytest.mark.parametrize(("difference", "expected"), [(1.0, 17), (0.8, 26), (0.5, 64)])
def test_required_repeats_matches_power_tables(difference, expected):
    # Cohen's d with sd 1, alpha 0.05 two-sided, power 0.8 (G*Power: 17, 26, 64)
    assert required_repeats(difference, 1.0, 1.0) == expected


def test_required_repeats_edge_cases():
    assert required_repeats(0.0, 1.0, 1.0) is None
    assert required_repeats(5.0, 0.0, 0.0) == 2
    assert required_repeats(1e-4, 1.0, 1.0) is None  # would need millions
    # unequal spreads use the pooled sd sqrt((3^2 + 1^2)/2) = sqrt(5)
    assert required_repeats(math.sqrt(5), 3.0, 1.0) == 17


def test_a_positive_quantity_keeps_its_interval_above_zero():
    from ddtune.stats.intervals import mean_ci, positive_mean_ci

    skewed = [0.02, 0.03, 1.9]  # a TTFT p99 over 3 repeats, one of them slow
    assert mean_ci(skewed).low < 0  # the t-interval crosses zero
    ci = positive_mean_ci(skewed)
    assert ci.mean == mean_ci(skewed).mean and 0 < ci.low < ci.mean < ci.high
    tight = [100.0, 101.0, 99.0, 100.5]  # small spread: the two agree closely
    a, b = mean_ci(tight), positive_mean_ci(tight)
    assert abs(a.low - b.low) < 0.01 and abs(a.high - b.high) < 0.01
    assert positive_mean_ci([1.0, -1.0, 3.0]) == mean_ci([1.0, -1.0, 3.0])  # not all positive
