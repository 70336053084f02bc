"""Plain statistics for the report: intervals, exact tests, ratios and power.

Every function takes plain numbers or sequences and returns plain numbers or
small frozen dataclasses, so each one can be checked against a textbook value.

    mean_ci                 mean and t-interval across repeats (n = 1: no interval)
    welch_difference        difference of two means with a Welch t-interval and p-value
    wilson_interval         Wilson score interval for a pass rate k/n
    fisher_exact_two_sided  Fisher's exact test for two pass rates
    ratio_ci                ratio of two independent means with a Fieller interval
    required_repeats        repeats per config for a two-sample t-test to separate a difference
See docs/architecture.md "Report".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats


@dataclass(frozen=True)
class MeanCI:
    """Sample mean with a two-sided t-interval; `low`/`high` are None when n < 2."""

    mean: float
    low: float | None
    high: float | None
    n: int
    sd: float | None  # sample standard deviation (ddof=1), None when n < 2

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None


@dataclass(frozen=True)
class Difference:
    """Difference of means a - b with a Welch interval; None fields when it can't be formed."""

    estimate: float
    low: float | None
    high: float | None
    p_value: float | None
    df: float | None

    @property
    def separated(self) -> bool:
        """True when the interval excludes zero (the t-test rejects equal means)."""
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> MeanCI:
    """Mean with a Student-t interval: mean ± t(1-α/2, n-1) · s/√n."""
    n = len(values)
    if n == 0:
        raise ValueError("mean_ci needs at least one value")
    mean = math.fsum(values) / n
    if n < 2:
        return MeanCI(mean, None, None, n, None)
    sd = _sample_sd(values, mean)
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return MeanCI(mean, mean - half, mean + half, n, sd)


def welch_difference(
    a: Sequence[float], b: Sequence[float], confidence: float = 0.95
) -> Difference:
    """Mean(a) - mean(b) with a Welch-Satterthwaite t-interval and two-sided p-value."""
    if not a or not b:
        raise ValueError("welch_difference needs values in both samples")
    mean_a, mean_b = math.fsum(a) / len(a), math.fsum(b) / len(b)
    estimate = mean_a - mean_b
    if len(a) < 2 or len(b) < 2:
        return Difference(estimate, None, None, None, None)
    va = _sample_sd(a, mean_a) ** 2 / len(a)  # squared standard error of mean(a)
    vb = _sample_sd(b, mean_b) ** 2 / len(b)
    se = math.sqrt(va + vb)
    if se == 0.0:  # both samples constant: any difference is exact
        p = 1.0 if estimate == 0 else 0.0
        return Difference(estimate, estimate, estimate, p, math.inf)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = float(stats.t.ppf(0.5 + confidence / 2, df)) * se
    p = 2 * float(stats.t.sf(abs(estimate) / se, df))
    return Difference(estimate, estimate - half, estimate + half, float(p), df)


def wilson_interval(passed: int, total: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion passed/total."""
    if total <= 0:
        raise ValueError("wilson_interval needs total > 0")
    if not 0 <= passed <= total:
        raise ValueError(f"passed must lie in [0, {total}]; got {passed}")
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    p = passed / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    low = 0.0 if passed == 0 else max(0.0, centre - half)  # exact ends at 0/n and n/n
    high = 1.0 if passed == total else min(1.0, centre + half)
    return low, high


def fisher_exact_two_sided(passed_a: int, total_a: int, passed_b: int, total_b: int) -> float:
    """Two-sided Fisher exact p-value for the 2x2 table [[pass, fail] per config]."""
    for passed, total in ((passed_a, total_a), (passed_b, total_b)):
        if total <= 0 or not 0 <= passed <= total:
            raise ValueError(f"need 0 <= passed <= total and total > 0; got {passed}/{total}")
    table = [[passed_a, total_a - passed_a], [passed_b, total_b - passed_b]]
    return float(stats.fisher_exact(table, alternative="two-sided").pvalue)


def ratio_ci(
    numerator: Sequence[float], denominator: Sequence[float], confidence: float = 0.95
) -> MeanCI:
    """Ratio of two independent means with Fieller's interval.

    Solves (ā - ρ·b̄)² = t² · (v_a + ρ²·v_b) for ρ, where v = s²/n is the squared
    standard error of each mean and t uses the Welch-Satterthwaite degrees of
    freedom evaluated at the point estimate. The interval is None when either
    sample has fewer than two values or when b̄ is not clearly away from zero
    (then Fieller's set is unbounded). `n` is the numerator's sample size, `sd` None.
    """
    if not numerator or not denominator:
        raise ValueError("ratio_ci needs values in both samples")
    mean_a = math.fsum(numerator) / len(numerator)
    mean_b = math.fsum(denominator) / len(denominator)
    if mean_b == 0:
        raise ValueError("ratio_ci: the denominator's mean is zero")
    ratio = mean_a / mean_b
    if len(numerator) < 2 or len(denominator) < 2:
        return MeanCI(ratio, None, None, len(numerator), None)
    va = _sample_sd(numerator, mean_a) ** 2 / len(numerator)
    vb = _sample_sd(denominator, mean_b) ** 2 / len(denominator)
    t = float(stats.t.ppf(0.5 + confidence / 2, _fieller_df(va, vb, ratio, numerator, denominator)))
    a2 = mean_b * mean_b - t * t * vb  # quadratic: a2·ρ² - 2·a1·ρ + a0 = 0
    a1 = mean_a * mean_b
    a0 = mean_a * mean_a - t * t * va
    disc = a1 * a1 - a2 * a0
    if a2 <= 0 or disc < 0:
        return MeanCI(ratio, None, None, len(numerator), None)
    root = math.sqrt(disc)
    return MeanCI(ratio, (a1 - root) / a2, (a1 + root) / a2, len(numerator), None)


def required_repeats(
    difference: float,
    sd_a: float,
    sd_b: float,
    alpha: float = 0.05,
    power: float = 0.8,
    max_repeats: int = 10_000,
) -> int | None:
    """Repeats per config for a two-sided two-sample t-test to detect `difference`.

    Uses the pooled sd √((sd_a² + sd_b²)/2) and the exact power of the t-test
    (noncentral t), so d = 1 gives 17 and d = 0.5 gives 64 per group at α = 0.05,
    power 0.8. Returns None when the difference is zero or more than
    `max_repeats` would be needed, and 2 when the spread is zero.
    """
    if difference == 0:
        return None
    sd = math.sqrt((sd_a * sd_a + sd_b * sd_b) / 2)
    if sd == 0:
        return 2
    effect = abs(difference) / sd
    z_sum = float(stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power))
    normal_n = 2 * (z_sum / effect) ** 2  # the z-test's n; the t-test needs a little more
    if normal_n > max_repeats:
        return None
    for n in range(max(2, int(normal_n)), max_repeats + 1):
        if _t_test_power(effect, n, alpha) >= power:
            return n
    return None


def _t_test_power(effect: float, n: int, alpha: float) -> float:
    """Power of the two-sided equal-n two-sample t-test at standardized effect `effect`."""
    df = 2 * n - 2
    noncentrality = effect * math.sqrt(n / 2)
    t_crit = stats.t.ppf(1 - alpha / 2, df)
    upper = stats.nct.sf(t_crit, df, noncentrality)
    lower = stats.nct.cdf(-t_crit, df, noncentrality)
    return float(upper + lower)


def _fieller_df(
    va: float, vb: float, ratio: float, a: Sequence[float], b: Sequence[float]
) -> float:
    """Welch-Satterthwaite df of ā - ρ·b̄ at ρ = the point estimate."""
    wa, wb = va, ratio * ratio * vb
    if wa + wb == 0:
        return math.inf
    return (wa + wb) ** 2 / (wa * wa / (len(a) - 1) + wb * wb / (len(b) - 1))


def _sample_sd(values: Sequence[float], mean: float) -> float:
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))
