"""Decisions across configurations: pass rates vs the best, Pareto front, recommendations.

Rules (docs/architecture.md "Report", decision rules):
- a pass rate is "significantly below the best" when Fisher's exact test
  (two-sided) gives p < alpha; otherwise the words say n is too small to separate;
- two throughputs are "separated" when the Welch t-interval of their difference
  excludes 0; when it does not, the recommendation is "inconclusive" and names
  the repeats per config a two-sample t-test would need (observed spread, power);
- means within `tie_tolerance` of the best count as tied and the cheaper config
  (`summarize.cost_key`: ar < dflash < ddtree, then smaller budget, topk, window) wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ddtune.report.options import ReportOptions
from ddtune.report.statistics import fisher_exact_two_sided, required_repeats, welch_difference
from ddtune.report.summarize import THROUGHPUT, ConfigSummary

OBJECTIVES = (
    (
        "throughput",
        THROUGHPUT,
        "highest throughput whose pass rate is not significantly below the best",
    ),
    ("long_context", "long_tps", "best long-context tok/s"),
    ("short_context", "short_tps", "best short-context tok/s"),
)
METRIC_WORDS = {
    THROUGHPUT: "throughput (geometric mean of short and long)",
    "short_tps": "short",
    "long_tps": "long",
}
PARETO_METRICS = ("short_tps", "long_tps", "pass_rate")


@dataclass
class PassRateComparison:
    label: str
    best_label: str
    p_value: float
    significantly_below: bool
    text: str


@dataclass
class Recommendation:
    objective: str
    metric: str
    description: str
    status: str  # "recommended" | "inconclusive" | "no data"
    label: str | None
    text: str
    contenders: list[str] = field(default_factory=list)  # not separated from `label`
    required_repeats: int | None = None  # per config, to separate from the nearest contender
    excluded: list[str] = field(default_factory=list)  # failed the pass-rate condition


def best_pass_rate(summaries: Sequence[ConfigSummary]) -> ConfigSummary | None:
    """Highest pooled pass rate; ties go to more tasks, then the cheaper config."""
    coded = [(s, s.coding) for s in summaries if s.coding is not None]
    if not coded:
        return None
    return min(coded, key=lambda sc: (-sc[1].rate, -sc[1].total, sc[0].cost, sc[0].label))[0]


def compare_pass_rates(
    summaries: Sequence[ConfigSummary], alpha: float
) -> dict[str, PassRateComparison]:
    """Each config with coding results against the best one (Fisher exact, two-sided)."""
    best = best_pass_rate(summaries)
    b = None if best is None else best.coding
    if best is None or b is None:
        return {}
    results = {}
    for s in summaries:
        c = s.coding
        if c is None or s is best:
            continue
        p = fisher_exact_two_sided(c.passed, c.total, b.passed, b.total)
        below = p < alpha and c.rate < b.rate
        counts = f"{c.passed}/{c.total} vs {b.passed}/{b.total} ({best.label})"
        if below:
            text = f"significantly below the best: {counts}, Fisher p = {p:.3g}"
        elif c.rate == b.rate:
            text = f"same pass rate as the best: {counts}, Fisher p = {p:.2f}"
        else:
            text = (
                f"not significantly different: {counts}, Fisher p = {p:.2f}; "
                f"n is too small to separate these pass rates"
            )
        results[s.label] = PassRateComparison(s.label, best.label, p, below, text)
    return results


def pareto_front(summaries: Sequence[ConfigSummary]) -> list[str]:
    """Labels of configs no other config beats on every measured axis (missing = worst)."""
    points = {s.label: _pareto_point(s) for s in summaries if s.done > 0}
    axes = [i for i in range(len(PARETO_METRICS)) if any(p[i] is not None for p in points.values())]
    if not axes:
        return []  # nothing measured: no front
    scored = {label: tuple(_worst_if_missing(p[i]) for i in axes) for label, p in points.items()}
    return [
        label for label, p in scored.items() if not any(_dominates(q, p) for q in scored.values())
    ]


def recommend(
    summaries: Sequence[ConfigSummary],
    pass_rates: dict[str, PassRateComparison],
    options: ReportOptions,
) -> list[Recommendation]:
    recommendations = []
    for objective, metric, description in OBJECTIVES:
        candidates = [s for s in summaries if s.mean(metric) is not None]
        excluded: list[str] = []
        if objective == "throughput":
            candidates, excluded = _pass_rate_eligible(candidates, summaries, pass_rates)
        rec = _recommend_one(objective, metric, description, candidates, options)
        rec.excluded = excluded
        if excluded:
            rec.text += f" Not eligible (pass rate significantly below the best, or not measured): {', '.join(excluded)}."
        recommendations.append(rec)
    return recommendations


def _recommend_one(
    objective: str,
    metric: str,
    description: str,
    candidates: list[ConfigSummary],
    options: ReportOptions,
) -> Recommendation:
    if not candidates:
        return Recommendation(
            objective, metric, description, "no data", None, f"No data for {description}."
        )
    tol = options.tie_tolerance
    top = max(s.ci(metric).mean for s in candidates)
    tied = [s for s in candidates if s.ci(metric).mean >= top * (1 - tol)]
    winner = min(tied, key=lambda s: (s.cost, -s.ci(metric).mean, s.label))
    # practically equal to the winner (within the tolerance of its mean) is no contender either
    floor = winner.ci(metric).mean * (1 - tol)
    equal = [s for s in candidates if s not in tied and s.ci(metric).mean >= floor]
    contenders = [
        s
        for s in candidates
        if s not in tied
        and s not in equal
        and not welch_difference(
            winner.samples[metric], s.samples[metric], options.confidence
        ).separated
    ]
    notes = _tie_notes(len(tied) - 1, len(equal), tol)
    value = _value_text(winner, metric)
    if not contenders:
        text = f"{winner.label}: {value}.{notes}{_overlap_note(winner, candidates, tied + equal, metric)}"
        return Recommendation(objective, metric, description, "recommended", winner.label, text)
    nearest = max(contenders, key=lambda s: s.ci(metric).mean)
    repeats, repeats_text = _repeats_needed(winner, nearest, metric, options)
    text = (
        f"inconclusive: {winner.label} ({value}) cannot be separated from {_names(contenders)} "
        f"(the {options.confidence:.0%} interval of the difference includes 0). "
        f"{repeats_text} Leaning: {winner.label}.{notes}"
    )
    rec = Recommendation(objective, metric, description, "inconclusive", winner.label, text)
    rec.contenders, rec.required_repeats = [s.label for s in contenders], repeats
    return rec


def _overlap_note(
    winner: ConfigSummary, candidates: list[ConfigSummary], skip: list[ConfigSummary], metric: str
) -> str:
    """Say so when the runner-up's interval overlaps the winner's although the difference is clear."""
    rest = [s for s in candidates if s not in skip]
    if not rest:
        return ""
    runner_up = max(rest, key=lambda s: s.ci(metric).mean)
    a, b = winner.ci(metric), runner_up.ci(metric)
    if a.low is not None and b.high is not None and a.low <= b.high:  # both have intervals
        return (
            f" Its interval overlaps that of {runner_up.label}, but the interval of the "
            "difference excludes 0 (Welch): the two are separated."
        )
    return ""


def _tie_notes(tied: int, equal: int, tolerance: float) -> str:
    notes = ""
    if tied:
        notes += f" {tied} other config(s) within {tolerance:.0%} of the best mean: the cheaper one is preferred."
    if equal:
        notes += f" {equal} other config(s) within {tolerance:.0%} of the recommended one: practically equal."
    return notes


def _names(configs: list[ConfigSummary], shown: int = 4) -> str:
    names = ", ".join(s.label for s in configs[:shown])
    more = len(configs) - shown
    return names + (f" and {more} more" if more > 0 else "")


def _repeats_needed(
    a: ConfigSummary, b: ConfigSummary, metric: str, options: ReportOptions
) -> tuple[int | None, str]:
    ci_a, ci_b = a.ci(metric), b.ci(metric)
    sds = [ci.sd for ci in (ci_a, ci_b) if ci.sd is not None]
    if not sds:
        return None, "Run at least 2 repeats per config to estimate the spread."
    sd_a = ci_a.sd if ci_a.sd is not None else sds[0]
    sd_b = ci_b.sd if ci_b.sd is not None else sds[0]
    difference = ci_a.mean - ci_b.mean
    n = required_repeats(difference, sd_a, sd_b, options.alpha, options.power)
    against = f"from {b.label} (the nearest, {difference:+.3g} tok/s)"
    if n is None:
        return None, (
            f"Separating it {against} would take more repeats than is practical at the observed spread."
        )
    have = min(ci_a.n, ci_b.n)
    return n, (
        f"About {n} repeats per config (now {have}) would separate it {against} at the observed "
        f"spread (two-sample t, {options.power:.0%} power, alpha {options.alpha:g})."
    )


def _pass_rate_eligible(
    candidates: list[ConfigSummary],
    summaries: Sequence[ConfigSummary],
    pass_rates: dict[str, PassRateComparison],
) -> tuple[list[ConfigSummary], list[str]]:
    if not any(s.coding is not None for s in summaries):
        return candidates, []  # pass rate not measured anywhere: nothing to hold against
    eligible, excluded = [], []
    for s in candidates:
        comparison = pass_rates.get(s.label)
        if s.coding is None or (comparison is not None and comparison.significantly_below):
            excluded.append(s.label + ("" if s.coding is not None else " (pass rate not measured)"))
        else:
            eligible.append(s)
    return eligible, excluded


def _value_text(s: ConfigSummary, metric: str) -> str:
    ci = s.ci(metric)
    interval = f" [{ci.low:.1f}, {ci.high:.1f}]" if ci.has_interval else " (n = 1, no CI)"
    value = f"{METRIC_WORDS.get(metric, metric)} {ci.mean:.1f} tok/s{interval}"
    ratio = s.ratios.get(metric)
    if ratio is None or s.is_baseline:
        return value
    ratio_interval = f" [{ratio.low:.2f}, {ratio.high:.2f}]" if ratio.has_interval else ""
    return f"{value}, {ratio.mean:.2f}x baseline{ratio_interval}"


def _pareto_point(s: ConfigSummary) -> tuple[float | None, ...]:
    return (s.mean("short_tps"), s.mean("long_tps"), None if s.coding is None else s.coding.rate)


def _worst_if_missing(value: float | None) -> float:
    return float("-inf") if value is None else value


def _dominates(q: tuple[float, ...], p: tuple[float, ...]) -> bool:
    return all(a >= b for a, b in zip(q, p, strict=True)) and any(
        a > b for a, b in zip(q, p, strict=True)
    )
