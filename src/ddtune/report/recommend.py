"""Decisions across configurations: pass rates vs the best, Pareto front, recommendations.

Rules (docs/report.md "How the report is built", decision rules):
- a pass rate is "significantly below the best" when Fisher's exact test
  (two-sided) gives p < alpha; otherwise the words say n is too small to separate;
- each objective's verdict is `blocked.decide` over the per-pass values:
  `separated` (the leader beats every other config), `equivalent` (the rest is
  separated or within `tolerance` by TOST: the cheapest of the equivalent
  configs, `summarize.cost_key`, is recommended) or `inconclusive` (with the
  passes a paired t-test would need); paired by pass for interleaved sweeps,
  Welch on the logs otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ddtune.records import MIX_TPS, workload_metric
from ddtune.report.options import ReportOptions
from ddtune.report.summarize import THROUGHPUT, Coding, ConfigSummary, workload_names
from ddtune.stats.blocked import BlockedOptions, Verdict, decide
from ddtune.stats.intervals import fisher_exact_two_sided

OBJECTIVES = (
    (
        "throughput",
        THROUGHPUT,
        "highest throughput whose pass rate is not significantly below the best",
    ),
    ("long_context", "long_tps", "best long-context tok/s"),
    ("short_context", "short_tps", "best short-context tok/s"),
)
MIX = "mix"
METRIC_WORDS = {
    THROUGHPUT: "throughput (geometric mean of short and long)",
    "short_tps": "short",
    "long_tps": "long",
    MIX_TPS: "the mix's",
}
CodingOf = Callable[[ConfigSummary], Coding | None]


def workload_objective(workload: str) -> str:
    """The objective of one workload's own recommendation: "workload:humaneval"."""
    return f"workload:{workload}"


def objectives(summaries: Sequence[ConfigSummary]) -> list[tuple[str, str, str]]:
    """The report's objectives: the three of `OBJECTIVES`, and where the bench ran suites or
    traffic, the mix (`[bench] mix`) and one per workload."""
    names = workload_names(summaries)
    if names in ([], ["bundled"]):
        return list(OBJECTIVES)
    mix = (
        MIX,
        MIX_TPS,
        "highest tok/s over the workload mix whose pass rates are not significantly below the best",
    )
    own = [(workload_objective(n), workload_metric(n, "tps"), f"best {n} tok/s") for n in names]
    base = list(OBJECTIVES) if "bundled" in names else []  # short/long tok/s come from it
    return [*base, mix, *own]


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
    status: str  # "separated" | "equivalent" | "inconclusive" | "no data"
    label: str | None  # the recommended config
    text: str
    leader: str | None = None  # the fastest (best config effect); `label` when separated
    equivalent: list[str] = field(default_factory=list)  # within tolerance of the leader
    contenders: list[str] = field(default_factory=list)  # neither separated nor equivalent
    required_repeats: int | None = None  # passes per config to separate the nearest contender
    more_passes: int | None = None  # inconclusive: passes beyond those done that would decide
    runner_up: str | None = None  # the config nearest the leader, and leader / runner-up
    runner_up_ratio: float | None = None
    excluded: list[str] = field(default_factory=list)  # failed the pass-rate condition
    left_race: list[str] = field(default_factory=list)  # eliminated by the race on this objective
    analysis: str = ""  # which comparison was used, and why


def _coding(s: ConfigSummary) -> Coding | None:
    return s.coding


def best_pass_rate(
    summaries: Sequence[ConfigSummary], coding_of: CodingOf = _coding
) -> ConfigSummary | None:
    """Highest pooled pass rate; ties go to more tasks, then the cheaper config."""
    coded = [(s, c) for s in summaries if (c := coding_of(s)) is not None]
    if not coded:
        return None
    return min(coded, key=lambda sc: (-sc[1].rate, -sc[1].total, sc[0].cost, sc[0].label))[0]


def compare_pass_rates(
    summaries: Sequence[ConfigSummary], alpha: float, coding_of: CodingOf = _coding
) -> dict[str, PassRateComparison]:
    """Each config with coding results against the best one (Fisher exact, two-sided);
    `coding_of`: which pass rate (a workload's own, `ConfigSummary.scores`)."""
    best = best_pass_rate(summaries, coding_of)
    b = None if best is None else coding_of(best)
    if best is None or b is None:
        return {}
    results = {}
    for s in summaries:
        c = coding_of(s)
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
    race: tuple[str, Sequence[str]] | None = None,
    race_verdict: Verdict | None = None,
) -> list[Recommendation]:
    """One recommendation per objective. `race` = (the objective a race ran on, the
    configs it eliminated): that objective decides among the race's contenders
    only, as the race did; each eliminated config's test is in the race table.
    `race_verdict`: a restart-bound race's own answer on that objective (its mixed
    model of the starts), which the report repeats instead of pairing by pass."""
    recommendations = []
    for objective, metric, description in objectives(summaries):
        candidates = [s for s in summaries if s.mean(metric) is not None]
        candidates, excluded = _eligible(objective, candidates, summaries, pass_rates, options)
        left = list(race[1]) if race is not None and race[0] == objective else []
        candidates = [s for s in candidates if s.label not in left] or candidates
        own = race_verdict if race is not None and race[0] == objective else None
        rec = _recommend_one(objective, metric, description, candidates, options, own)
        rec.excluded, rec.left_race = excluded, left
        if left and len(candidates) == 1:
            rec.text = _last_one_text(candidates[0], metric, own is not None)
        if excluded:
            rec.text += f" Not eligible (pass rate significantly below the best, or not measured): {', '.join(excluded)}."
        if left:
            rec.text += f" Left the race (see the race table for when and why): {', '.join(left)}."
        recommendations.append(rec)
    return recommendations


def _recommend_one(
    objective: str,
    metric: str,
    description: str,
    candidates: list[ConfigSummary],
    options: ReportOptions,
    own: Verdict | None = None,
) -> Recommendation:
    if not candidates:
        return Recommendation(
            objective, metric, description, "no data", None, f"No data for {description}."
        )
    by_label = {s.label: s for s in candidates}
    samples = {s.label: s.by_pass.get(metric, {}) for s in candidates}
    verdict = (
        own
        if own is not None and own.label in by_label
        else decide(samples, lambda label: by_label[label].cost, blocked_options(options))
    )
    label = verdict.label or candidates[0].label
    rec = Recommendation(objective, metric, description, verdict.status, label, "")
    rec.leader, rec.equivalent, rec.contenders = (
        verdict.leader,
        verdict.equivalent,
        verdict.contenders,
    )
    rec.required_repeats, rec.analysis = verdict.required_passes, _analysis(verdict, options)
    _note_runner_up(rec, verdict, by_label)
    rec.text = _verdict_text(verdict, by_label, metric, options) + f" Analysis: {rec.analysis}."
    return rec


def _note_runner_up(
    rec: Recommendation, verdict: Verdict, by_label: dict[str, ConfigSummary]
) -> None:
    """The nearest config to the leader, and how many more passes would decide."""
    if not verdict.comparisons:
        return
    nearest = verdict.nearest or _closest(verdict)
    rec.runner_up, rec.runner_up_ratio = nearest, verdict.comparisons[nearest].ratio
    if verdict.required_passes is not None and verdict.leader is not None:
        have = _passes_shared(by_label, verdict.leader, nearest)
        rec.more_passes = max(verdict.required_passes - have, 1)


def _last_one_text(winner: ConfigSummary, metric: str, restart_bound: bool = False) -> str:
    how = (
        "by the mixed model of the starts, after any bench, Holm-corrected"
        if restart_bound
        else "paired by pass, Holm-corrected"
    )
    return (
        f"{winner.label}: {_value_text(winner, metric)}. The one config left in the race: "
        f"every other config left it as significantly slower than the leader ({how}), "
        "with a pass rate significantly below the best (Fisher) or failing. "
        "Analysis: the race's eliminations."
    )


def blocked_options(options: ReportOptions) -> BlockedOptions:
    return BlockedOptions(
        tolerance=options.tolerance,
        alpha=options.alpha,
        confidence=options.confidence,
        power=options.power,
        blocked=options.blocked,
    )


def _analysis(verdict: Verdict, options: ReportOptions) -> str:
    if verdict.method == "mixed":
        return (
            "the restart-bound race's mixed model of its starts (config effect + start effect "
            "+ bench noise + drift in time; the start variance pooled over the configs)"
        )
    passes = max((c.n for c in verdict.comparisons.values()), default=0)
    if verdict.method == "paired":
        return f"paired by pass over up to {passes} passes (interleaved blocks: drift between passes cancels)"
    why = (
        "the order is not interleaved"
        if not options.blocked
        else "fewer than 2 passes shared by the compared configs"
    )
    if verdict.method == "welch":
        return f"Welch on the logs, as independent samples ({why})"
    return f"paired by pass where 2+ passes are shared, else Welch ({why})"


def _verdict_text(
    verdict: Verdict, by_label: dict[str, ConfigSummary], metric: str, options: ReportOptions
) -> str:
    leader, label = verdict.leader or "", verdict.label or ""
    value = _value_text(by_label[label], metric)
    tol = f"±{options.tolerance:.0%}"
    if verdict.status == "separated":
        return f"{label}: {value}. Separated from every other config{_nearest(verdict)}."
    if verdict.status == "equivalent":
        others = [x for x in [leader, *verdict.equivalent] if x != label]
        why = (
            "the fastest of the equivalent configs, so recommended"
            if label == leader
            else f"the cheapest of the equivalent configs, so recommended ({leader} is the fastest)"
        )
        return (
            f"{label}: {value}. Equivalent within {tol} to {name_list(others)} (the "
            f"{1 - 2 * options.alpha:.0%} interval of each ratio lies inside the tolerance, two "
            f"one-sided tests): {why}.{_separated_note(verdict)}"
        )
    return (
        f"inconclusive: {leader} ({value}) is neither separated from nor within {tol} of "
        f"{name_list(verdict.contenders)}. {_passes_text(verdict, by_label, options)} "
        f"Leaning: {leader}."
    )


def _nearest(verdict: Verdict) -> str:
    if not verdict.comparisons:
        return ""
    runner_up = _closest(verdict)
    r = verdict.comparisons[runner_up]
    interval = f" [{r.low:.3f}, {r.high:.3f}]" if r.low is not None and r.high is not None else ""
    return f"; the nearest, {runner_up}, is behind by {r.ratio:.3f}x{interval}"


def _closest(verdict: Verdict) -> str:
    """The compared config with the smallest estimated gap to the leader."""
    return min(verdict.comparisons, key=lambda s: verdict.comparisons[s].log_estimate)


def _passes_shared(by_label: dict[str, ConfigSummary], a: str, b: str) -> int:
    return min(by_label[a].done, by_label[b].done)


def _separated_note(verdict: Verdict) -> str:
    return (
        f" {len(verdict.separated)} other config(s) are separated (slower)."
        if verdict.separated
        else ""
    )


def _passes_text(
    verdict: Verdict, by_label: dict[str, ConfigSummary], options: ReportOptions
) -> str:
    nearest = verdict.nearest or verdict.contenders[0]
    ratio = verdict.comparisons[nearest]
    if ratio.se is None:
        return "Run at least 2 passes per config to estimate the spread."
    against = f"from {nearest} (the nearest, {ratio.ratio:.3f}x)"
    if ratio.method == "mixed":
        return f"More starts of both would be needed to separate it {against}."
    if verdict.required_passes is None:
        return f"Separating it {against} would take more passes than is practical at the observed spread."
    have = _passes_shared(by_label, verdict.leader or nearest, nearest)
    return (
        f"About {verdict.required_passes} passes per config (now {have}) would separate it "
        f"{against} at the observed spread ({ratio.method} t, {options.power:.0%} power, "
        f"alpha {options.alpha:g})."
    )


def name_list(labels: list[str], shown: int = 4) -> str:
    """'a, b, c, d and 2 more'."""
    names = ", ".join(labels[:shown])
    more = len(labels) - shown
    return names + (f" and {more} more" if more > 0 else "")


def _eligible(
    objective: str,
    candidates: list[ConfigSummary],
    summaries: Sequence[ConfigSummary],
    pass_rates: dict[str, PassRateComparison],
    options: ReportOptions,
) -> tuple[list[ConfigSummary], list[str]]:
    """The throughput and mix objectives hold the coding pass rate against a config (as
    today), a workload's own objective its pass rate, the mix every workload's."""
    if objective in ("throughput", MIX):
        candidates, excluded = _pass_rate_eligible(candidates, summaries, pass_rates)
    else:
        excluded = []
    scored = [w for w in workload_names(summaries) if any(w in s.scores for s in summaries)]
    for workload in scored:
        if objective not in (MIX, workload_objective(workload)):
            continue
        coding_of = _scores_of(workload)
        rates = compare_pass_rates(summaries, options.alpha, coding_of)
        candidates, more = _pass_rate_eligible(candidates, summaries, rates, coding_of)
        excluded += [f"{label} ({workload})" for label in more]
    return candidates, excluded


def _scores_of(workload: str) -> CodingOf:
    """The pass rate of one workload (`ConfigSummary.scores`)."""

    def coding_of(s: ConfigSummary) -> Coding | None:
        return s.scores.get(workload)

    return coding_of


def _pass_rate_eligible(
    candidates: list[ConfigSummary],
    summaries: Sequence[ConfigSummary],
    pass_rates: dict[str, PassRateComparison],
    coding_of: CodingOf = _coding,
) -> tuple[list[ConfigSummary], list[str]]:
    if not any(coding_of(s) is not None for s in summaries):
        return candidates, []  # pass rate not measured anywhere: nothing to hold against
    eligible, excluded = [], []
    for s in candidates:
        comparison = pass_rates.get(s.label)
        coded = coding_of(s) is not None
        if not coded or (comparison is not None and comparison.significantly_below):
            excluded.append(s.label + ("" if coded else " (pass rate not measured)"))
        else:
            eligible.append(s)
    return eligible, excluded


def _value_text(s: ConfigSummary, metric: str) -> str:
    ci = s.ci(metric)
    interval = f" [{ci.low:.1f}, {ci.high:.1f}]" if ci.has_interval else " (n = 1, no CI)"
    words = METRIC_WORDS.get(metric, metric.removesuffix("/tps"))
    value = f"{words} {ci.mean:.1f} tok/s{interval}"
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
