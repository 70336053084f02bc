"""Plain statistics for the report: intervals, exact tests, ratios and power.

Every function takes plain numbers or sequences and returns plain numbers or
small frozen dataclasses, so each one can be checked against a textbook value.

    mean_ci                 mean and t-interval across repeats (n = 1: no interval)
    welch_difference        difference of two means with a Welch t-interval and p-value
    wilson_interval         Wilson score interval for a pass rate k/n
    fisher_exact_two_sided  Fisher's exact test for two pass rates
    ratio_ci                ratio of two independent means with a Fieller interval
    required_repeats        repeats per config for a two-sample t-test to separate a difference
    paired_log_ratio        ratio a/b from per-pass pairs (blocked design): paired t on log(a/b)
    welch_log_ratio         ratio a/b from independent samples: Welch t on the logs
    tost_equivalence        two one-sided tests: is a ratio within [1/(1+tol), 1+tol]?
    holm_adjust             Holm step-down adjusted p-values for a family of tests
    required_pairs          passes for a paired t-test to separate a log ratio
    variance_components     one-way random effects: between-group vs within-group variance
    ratio_interval          a log ratio with its standard error and df as a `RatioInterval`

See docs/report.md "How the report is built".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

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


def positive_mean_ci(values: Sequence[float], confidence: float = 0.95) -> MeanCI:
    """The mean of a positive quantity (tok/s, a latency) with an interval that stays above
    zero: the t-interval of log(mean) by the delta method, SE = s / (mean·√n), mapped back,
    so mean · exp(±t·SE). It matches `mean_ci` when the spread is small and, unlike it,
    never reaches below zero for a skewed handful of samples (a TTFT p99 of 3 repeats).
    Values that are not all positive get `mean_ci`."""
    plain = mean_ci(values, confidence)
    if not plain.has_interval or min(values) <= 0 or plain.sd is None:
        return plain
    se = plain.sd / (plain.mean * math.sqrt(plain.n))
    t = float(stats.t.ppf(0.5 + confidence / 2, plain.n - 1))
    return MeanCI(
        plain.mean, plain.mean * math.exp(-t * se), plain.mean * math.exp(t * se), plain.n, plain.sd
    )


def format_ci(ci: MeanCI | None, digits: int = 1) -> str:
    """'170.2 [165.1, 175.3]', '170.2 (n=1)' or '-'."""
    if ci is None:
        return "-"
    if not ci.has_interval:
        return f"{ci.mean:.{digits}f} (n=1)"
    return f"{ci.mean:.{digits}f} [{ci.low:.{digits}f}, {ci.high:.{digits}f}]"


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
    return _smallest_n(abs(difference) / sd, 2, alpha, power, max_repeats)


RatioMethod = Literal["paired", "welch", "mixed"]  # mixed: `stats/mixed.py` (restart-bound races)


@dataclass(frozen=True)
class RatioInterval:
    """Ratio a/b estimated on the log scale (geometric means).

    `log_estimate` is the mean of log(a) - log(b) (paired) or the difference of the
    mean logs (Welch); `se` and `df` describe it, so intervals at any level follow.
    `low`/`high`/`p_value` are None when the spread can't be estimated (n < 2).
    """

    method: RatioMethod
    log_estimate: float
    se: float | None
    df: float | None
    n: int  # pairs (paired) or the smaller sample (welch)
    confidence: float
    low: float | None
    high: float | None
    p_value: float | None  # two-sided test of ratio = 1

    @property
    def ratio(self) -> float:
        return math.exp(self.log_estimate)

    @property
    def separated(self) -> bool:
        """True when the interval excludes 1 (the test rejects equal geometric means)."""
        return self.low is not None and self.high is not None and (self.low > 1 or self.high < 1)

    def interval(self, confidence: float) -> tuple[float, float] | None:
        """The ratio's interval at another level (None without a spread)."""
        if self.se is None or self.df is None:
            return None
        half = _t_quantile(0.5 + confidence / 2, self.df) * self.se
        return math.exp(self.log_estimate - half), math.exp(self.log_estimate + half)


@dataclass(frozen=True)
class Equivalence:
    """TOST of a ratio against the margin [1/(1+tolerance), 1+tolerance]."""

    equivalent: bool
    p_value: float | None  # max of the two one-sided p-values; None without a spread
    tolerance: float
    low: float | None  # the (1 - 2·alpha) interval the decision is equivalent to
    high: float | None


@dataclass(frozen=True)
class VarianceComponents:
    """One-way random-effects split of the variance (method of moments, unbalanced n0)."""

    between: float  # variance of the group effects (e.g. between server starts), >= 0
    within: float  # variance inside a group (e.g. between benches of one start)
    groups: int
    observations: int

    @property
    def between_share(self) -> float:
        total = self.between + self.within
        return self.between / total if total > 0 else 0.0


def paired_log_ratio(
    a: Sequence[float], b: Sequence[float], confidence: float = 0.95
) -> RatioInterval:
    """Ratio of geometric means from pairs (a_i, b_i) measured in the same block (pass)."""
    if len(a) != len(b) or not a:
        raise ValueError("paired_log_ratio needs two equally long, non-empty samples")
    diffs = [_log(x) - _log(y) for x, y in zip(a, b, strict=True)]
    mean = math.fsum(diffs) / len(diffs)
    if len(diffs) < 2:
        return RatioInterval("paired", mean, None, None, 1, confidence, None, None, None)
    se = _sample_sd(diffs, mean) / math.sqrt(len(diffs))
    return ratio_interval("paired", mean, se, len(diffs) - 1, len(diffs), confidence)


def welch_log_ratio(
    a: Sequence[float], b: Sequence[float], confidence: float = 0.95
) -> RatioInterval:
    """Ratio of geometric means from independent samples (Welch t on the logs)."""
    if not a or not b:
        raise ValueError("welch_log_ratio needs values in both samples")
    la, lb = [_log(x) for x in a], [_log(y) for y in b]
    mean = math.fsum(la) / len(la) - math.fsum(lb) / len(lb)
    n = min(len(la), len(lb))
    if n < 2:
        return RatioInterval("welch", mean, None, None, n, confidence, None, None, None)
    va = _sample_sd(la, math.fsum(la) / len(la)) ** 2 / len(la)
    vb = _sample_sd(lb, math.fsum(lb) / len(lb)) ** 2 / len(lb)
    se = math.sqrt(va + vb)
    df = math.inf if se == 0 else (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1))
    return ratio_interval("welch", mean, se, df, n, confidence)


def tost_equivalence(ratio: RatioInterval, tolerance: float, alpha: float = 0.05) -> Equivalence:
    """Two one-sided t-tests of |log ratio| < log(1 + tolerance), each at level alpha.

    Equivalent exactly when the (1 - 2·alpha) interval (90% at alpha 0.05) lies
    inside [1/(1+tolerance), 1+tolerance].
    """
    if tolerance <= 0:
        raise ValueError(f"tolerance must be > 0; got {tolerance}")
    if ratio.se is None or ratio.df is None:
        return Equivalence(False, None, tolerance, None, None)
    margin = math.log1p(tolerance)
    if ratio.se == 0:
        inside = abs(ratio.log_estimate) < margin
        return Equivalence(inside, 0.0 if inside else 1.0, tolerance, ratio.ratio, ratio.ratio)
    p_lower = float(stats.t.sf((ratio.log_estimate + margin) / ratio.se, ratio.df))
    p_upper = float(stats.t.cdf((ratio.log_estimate - margin) / ratio.se, ratio.df))
    p = max(p_lower, p_upper)
    interval = ratio.interval(1 - 2 * alpha)
    low, high = interval if interval is not None else (None, None)
    return Equivalence(p < alpha, p, tolerance, low, high)


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order (reject where adjusted < alpha)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def required_pairs(
    log_difference: float,
    sd_log: float,
    alpha: float = 0.05,
    power: float = 0.8,
    max_pairs: int = 10_000,
) -> int | None:
    """Passes for a two-sided paired t-test to detect a mean log ratio `log_difference`.

    `sd_log` is the spread of the per-pass log ratios. Exact power (noncentral t,
    df n - 1). None when the difference is zero or more than `max_pairs` are needed.
    """
    if log_difference == 0:
        return None
    if sd_log == 0:
        return 2
    return _smallest_n(abs(log_difference) / sd_log, 1, alpha, power, max_pairs)


def variance_components(groups: Sequence[Sequence[float]]) -> VarianceComponents:
    """Between- and within-group variance of a one-way random-effects model (ANOVA moments)."""
    sizes = [len(g) for g in groups if g]
    values = [v for g in groups for v in g]
    k, total = len(sizes), len(values)
    if k < 2 or total <= k:
        raise ValueError("variance_components needs >= 2 groups and a group with >= 2 values")
    grand = math.fsum(values) / total
    means = [math.fsum(g) / len(g) for g in groups if g]
    ss_between = math.fsum(n * (m - grand) ** 2 for n, m in zip(sizes, means, strict=True))
    ss_within = math.fsum(
        (v - m) ** 2 for g, m in zip([g for g in groups if g], means, strict=True) for v in g
    )
    ms_between, ms_within = ss_between / (k - 1), ss_within / (total - k)
    n0 = (total - math.fsum(n * n for n in sizes) / total) / (k - 1)
    between = max(0.0, (ms_between - ms_within) / n0)
    return VarianceComponents(between, ms_within, k, total)


def ratio_interval(
    method: RatioMethod, mean: float, se: float, df: float, n: int, confidence: float
) -> RatioInterval:
    """A log ratio `mean` with standard error `se` and `df` degrees of freedom as an interval."""
    if se == 0:
        p = 1.0 if mean == 0 else 0.0
        ratio = math.exp(mean)
        return RatioInterval(method, mean, 0.0, df, n, confidence, ratio, ratio, p)
    half = _t_quantile(0.5 + confidence / 2, df) * se
    p = 2 * float(stats.t.sf(abs(mean) / se, df))
    low, high = math.exp(mean - half), math.exp(mean + half)
    return RatioInterval(method, mean, se, df, n, confidence, low, high, p)


def _smallest_n(effect: float, groups: int, alpha: float, power: float, max_n: int) -> int | None:
    """The fewest values per group (at least 2) for a two-sided t-test at standardized effect
    `effect` to reach `power`: one sample (paired, `groups` 1) or two equal-n samples
    (`groups` 2). None when more than `max_n` are needed."""
    z_sum = float(stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power))
    normal_n = groups * (z_sum / effect) ** 2  # the z-test's n; the t-test needs a little more
    if normal_n > max_n:
        return None
    for n in range(max(2, int(normal_n)), max_n + 1):
        if _t_test_power(effect, n, groups, alpha) >= power:
            return n
    return None


def _t_quantile(q: float, df: float) -> float:
    return float(stats.norm.ppf(q)) if math.isinf(df) else float(stats.t.ppf(q, df))


def _log(value: float) -> float:
    if value <= 0:
        raise ValueError(f"log-ratio analysis needs positive values; got {value}")
    return math.log(value)


def _t_test_power(effect: float, n: int, groups: int, alpha: float) -> float:
    """Power of the two-sided t-test at standardized effect `effect` with n values per group:
    one sample (paired, `groups` 1) or two equal-n samples (`groups` 2)."""
    df = groups * n - groups
    noncentrality = effect * math.sqrt(n / groups)
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
