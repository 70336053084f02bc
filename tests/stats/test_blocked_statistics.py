"""Paired/Welch log ratios, TOST, Holm, paired power and variance components vs textbook values."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats

from ddtune.stats.intervals import (
    holm_adjust,
    paired_log_ratio,
    required_pairs,
    tost_equivalence,
    variance_components,
    welch_log_ratio,
)

A = [10.2, 11.0, 9.8, 10.5]
B = [9.9, 10.1, 9.5, 10.0]


def _logs(values):
    return [math.log(v) for v in values]


def test_paired_log_ratio_matches_scipy_paired_t():
    ratio = paired_log_ratio(A, B)
    ref = stats.ttest_rel(_logs(A), _logs(B))
    assert ratio.method == "paired" and ratio.n == 4 and ratio.df == 3
    assert ratio.p_value == pytest.approx(float(ref.pvalue), rel=1e-9)
    diffs = [x - y for x, y in zip(_logs(A), _logs(B), strict=True)]
    assert ratio.ratio == pytest.approx(math.exp(sum(diffs) / 4))
    half = stats.t.ppf(0.975, 3) * stats.sem(diffs)
    assert ratio.low == pytest.approx(math.exp(sum(diffs) / 4 - half))
    assert ratio.high == pytest.approx(math.exp(sum(diffs) / 4 + half))
    assert ratio.separated  # p = 0.033


def test_welch_log_ratio_matches_scipy_and_is_wider_here():
    welch = welch_log_ratio(A, B)
    ref = stats.ttest_ind(_logs(A), _logs(B), equal_var=False)
    assert welch.p_value == pytest.approx(float(ref.pvalue), rel=1e-9)
    assert welch.df == pytest.approx(4.677125, rel=1e-5)
    assert not welch.separated  # the pass effect counts as noise: p = 0.14
    paired = paired_log_ratio(A, B)
    assert welch.ratio == pytest.approx(paired.ratio)


def test_single_pair_has_no_interval_and_mismatched_lengths_fail():
    ratio = paired_log_ratio([2.0], [1.0])
    assert ratio.ratio == pytest.approx(2.0) and ratio.low is None and ratio.p_value is None
    assert not ratio.separated and ratio.interval(0.9) is None
    with pytest.raises(ValueError):
        paired_log_ratio([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="positive"):
        paired_log_ratio([1.0, 0.0], [1.0, 1.0])


def test_constant_log_ratio_is_exact():
    ratio = paired_log_ratio([2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    assert ratio.se == 0 and ratio.low == ratio.high == pytest.approx(2.0) and ratio.p_value == 0.0


def test_tost_is_the_90_percent_interval_inside_the_margin():
    rng = random.Random(7)
    for _ in range(40):
        a = [100 * math.exp(rng.gauss(0, 0.03)) for _ in range(5)]
        b = [100 * math.exp(rng.gauss(0.01, 0.03)) for _ in range(5)]
        ratio = paired_log_ratio(a, b)
        eq = tost_equivalence(ratio, 0.03, alpha=0.05)
        low, high = ratio.interval(0.90)
        assert eq.low == pytest.approx(low) and eq.high == pytest.approx(high)
        assert eq.equivalent == (low > 1 / 1.03 and high < 1.03)
        assert eq.equivalent == (eq.p_value < 0.05)


def test_tost_p_value_by_hand():
    ratio = paired_log_ratio(A, B)  # log estimate 0.04877, se 0.01294, df 3
    eq = tost_equivalence(ratio, 0.10)
    margin = math.log(1.10)
    p_lower = stats.t.sf((ratio.log_estimate + margin) / ratio.se, 3)
    p_upper = stats.t.cdf((ratio.log_estimate - margin) / ratio.se, 3)
    assert eq.p_value == pytest.approx(max(p_lower, p_upper))
    assert eq.equivalent  # p = 0.018
    assert not tost_equivalence(ratio, 0.03).equivalent
    with pytest.raises(ValueError):
        tost_equivalence(ratio, 0.0)


def test_tost_without_spread_is_never_equivalent():
    eq = tost_equivalence(paired_log_ratio([1.0], [1.0]), 0.5)
    assert not eq.equivalent and eq.p_value is None


def test_holm_textbook_example():
    # sorted 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1, kept monotone: 0.06)
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_adjust([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm_adjust([]) == []


def test_required_pairs_matches_gpower_one_sample_t():
    # G*Power, paired t (matched pairs), two-sided, alpha 0.05, power 0.8: d = 1 -> 10, d = 0.5 -> 34
    assert required_pairs(1.0, 1.0) == 10
    assert required_pairs(0.5, 1.0) == 34
    assert required_pairs(0.0, 1.0) is None
    assert required_pairs(0.1, 0.0) == 2
    assert required_pairs(1e-6, 1.0) is None


def test_variance_components_balanced_textbook():
    # means 2 and 5, grand 3.5: MSB = 13.5, MSW = 1, n0 = 3 -> between = (13.5 - 1) / 3
    vc = variance_components([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert vc.between == pytest.approx(12.5 / 3) and vc.within == pytest.approx(1.0)
    assert vc.groups == 2 and vc.observations == 6
    assert vc.between_share == pytest.approx((12.5 / 3) / (12.5 / 3 + 1))


def test_variance_components_unbalanced_and_clamped():
    vc = variance_components([[1.0, 3.0], [2.0, 2.0, 2.0], [1.5]])
    # MSB = 0.05/2, MSW = 2/3, n0 = (6 - 14/6)/2: negative estimate clamps to 0
    assert vc.between == 0.0 and vc.within == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        variance_components([[1.0, 2.0]])
