"""Decisions per load level: one recommendation per level, one for `load_weights`,
the crossover sentences and the serialisation warning (written by `findings.py`).

Objective at a level: goodput tok/s when the levels ran against an SLO, else
output tok/s (closed loop) or mean e2e latency (open loop, lower is better:
every config that keeps up delivers the offered rate). Each level gets the
report's own verdict (`stats/blocked.py`, docs/report.md "How the report is built"):
per-pass values (blocks with `passes_per_start`) compared paired over the
passes both configs completed, else Welch; `separated`, `equivalent` within
`tolerance` (the cheapest of the equivalents is recommended) or
`inconclusive` naming the contenders and the passes needed. Configs whose pass
rate is significantly below the best (or not measured while others are) are
not eligible. The load mix scores each pass by the weighted sum of its level
values relative to the best mean at each level, then gets the same verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from ddtune.records import TrialRecord
from ddtune.report.load.figures import (
    LevelFigures,
    LoadRecommendation,
    LoadReport,
    level_figures,
    max_rates,
)
from ddtune.report.load.findings import crossovers, serialisation
from ddtune.report.options import ReportOptions
from ddtune.report.recommend import PassRateComparison, blocked_options
from ddtune.report.summarize import ConfigSummary, Cost
from ddtune.stats.blocked import Verdict, decide

Objective = tuple[str, bool, str]  # figure, higher is better, words


def analyze_load(
    records: Sequence[TrialRecord],
    configs: Sequence[ConfigSummary],
    pass_rates: dict[str, PassRateComparison],
    options: ReportOptions,
) -> LoadReport | None:
    """Everything the report says about load levels; None when no trial ran any."""
    report = level_figures(records, options.confidence, options.passes_per_start)
    if report is None:
        return None
    report.max_rate, report.max_rate_notes = max_rates(records, options.confidence)
    by_label = {c.label: c for c in configs}
    eligible = _eligibility(configs, pass_rates)
    for level in report.levels:
        candidates = [f for f in report.at(level) if eligible(f.label)]
        report.recommendations.append(
            _level_recommendation(report, level, candidates, by_label, options)
        )
    report.mix = _mix(report, options, by_label, eligible)
    report.crossovers = crossovers(report, configs, blocked_options(options))
    report.serialisation = serialisation(report)
    report.best_changes = _best_changes(report.recommendations)
    return report


def objective(report: LoadReport, level: str) -> Objective:
    if report.slo:
        return "goodput_tps", True, "goodput tok/s"
    if level.startswith("r"):
        return "e2e_mean_s", False, "mean e2e latency s"
    return "output_tps", True, "output tok/s"


def verdict(
    samples: dict[str, dict[int, float]],
    maximize: bool,
    cost: Callable[[str], Cost],
    options: ReportOptions,
) -> Verdict:
    """The blocked verdict (separated / equivalent / inconclusive) over per-pass values."""
    blocked = replace(blocked_options(options), maximize=maximize)
    return decide(samples, cost, blocked)


def _level_recommendation(
    report: LoadReport,
    level: str,
    candidates: list[LevelFigures],
    by_label: dict[str, ConfigSummary],
    options: ReportOptions,
) -> LoadRecommendation:
    metric, higher, words = objective(report, level)
    samples = {f.label: f.by_pass[metric] for f in candidates if f.by_pass.get(metric)}
    found = verdict(samples, higher, lambda k: _cost(by_label, k), options)
    if found.label is None:
        return LoadRecommendation(level, metric, "no data", None, f"{level}: no data for {words}.")
    fig = next(f for f in candidates if f.label == found.label)
    value = _value_text(fig, metric, words) + _ratio_text(report, level, fig, metric, by_label)
    text = f"{level}: {found.label} ({value}). {verdict_words(found, options)}"
    if fig.is_serialised:
        text += " The server serialised requests here: queueing, not the config, sets the latency."
    return LoadRecommendation(level, metric, found.status, found.label, text, found.contenders)


def verdict_words(found: Verdict, options: ReportOptions) -> str:
    """One sentence on how sure the choice is, in the terms of the blocked verdict."""
    how = {"paired": "paired by pass", "welch": "Welch"}.get(found.method, found.method)
    if found.status == "separated":
        return f"Separated from every other config ({how})."
    if found.status == "equivalent":
        names = ", ".join(n for n in [found.leader or "", *found.equivalent] if n != found.label)
        return f"Equivalent within {options.tolerance:.0%} to {names}: the cheapest is recommended ({how})."
    names = ", ".join(found.contenders[:4]) + (
        f" and {len(found.contenders) - 4} more" if len(found.contenders) > 4 else ""
    )
    need = (
        f"; about {found.required_passes} passes would separate {found.nearest}"
        if found.required_passes
        else ""
    )
    return f"Inconclusive: cannot be separated from {names}{need} ({how})."


def _mix(
    report: LoadReport,
    options: ReportOptions,
    by_label: dict[str, ConfigSummary],
    eligible: Callable[[str], bool],
) -> LoadRecommendation | None:
    weights = {k: w for k, w in (options.load_weights or {}).items() if w > 0}
    if not weights:
        return None
    missing = sorted(set(weights) - set(report.levels))
    if missing:
        report.notes.append(
            f"report.load_weights names level(s) {', '.join(missing)} that were not measured "
            f"(measured: {', '.join(report.levels)}); they are left out of the mix"
        )
    weights = {k: w for k, w in weights.items() if k in report.levels}
    scores = _mix_scores(report, weights, eligible) if weights else {}
    found = verdict(scores, True, lambda k: _cost(by_label, k), options)
    words = "load mix (" + ", ".join(f"{k} {w:g}" for k, w in weights.items()) + ")"
    if found.label is None:
        text = f"{words}: no config measured every weighted level in a common pass."
        return LoadRecommendation("mix", "mix_score", "no data", None, text)
    values = scores[found.label].values()
    score = sum(values) / len(values)
    text = (
        f"{words}: {found.label} (score {score:.3f} of the best at each level). "
        + verdict_words(found, options)
    )
    return LoadRecommendation("mix", "mix_score", found.status, found.label, text, found.contenders)


def _mix_scores(
    report: LoadReport, weights: dict[str, float], eligible: Callable[[str], bool]
) -> dict[str, dict[int, float]]:
    """Per config and pass: sum of weight x value relative to the level's best mean, over the
    passes in which the config measured every weighted level."""
    total = sum(weights.values())
    per_level: dict[str, dict[str, dict[int, float]]] = {}
    for level in weights:
        metric, higher, _ = objective(report, level)
        values = {f.label: f.by_pass.get(metric, {}) for f in report.at(level) if eligible(f.label)}
        means = [sum(v.values()) / len(v) for v in values.values() if v]
        if not means:
            return {}
        best = max(means) if higher else min(means)
        per_level[level] = {
            k: {p: (x / best if higher else best / x) for p, x in v.items()}
            for k, v in values.items()
            if v
        }
    scores: dict[str, dict[int, float]] = {}
    for label in sorted(set.intersection(*(set(v) for v in per_level.values()))):
        passes = set.intersection(*(set(per_level[lv][label]) for lv in weights))
        scores[label] = {
            p: sum(weights[lv] * per_level[lv][label][p] for lv in weights) / total
            for p in sorted(passes)
        }
    return {k: v for k, v in scores.items() if v}


def _eligibility(
    configs: Sequence[ConfigSummary], pass_rates: dict[str, PassRateComparison]
) -> Callable[[str], bool]:
    """The throughput objective's rule: pass rate measured and not significantly below the best."""
    coded = {c.label for c in configs if c.coding is not None}

    def eligible(label: str) -> bool:
        if not coded:
            return True
        comparison = pass_rates.get(label)
        return label in coded and not (comparison is not None and comparison.significantly_below)

    return eligible


def _cost(by_label: dict[str, ConfigSummary], label: str) -> Cost:
    config = by_label.get(label)
    return config.cost if config is not None else (99, 0, 0, 0.0)


def _value_text(fig: LevelFigures, metric: str, words: str) -> str:
    ci = fig.metrics.get(metric)
    if ci is None:
        return f"{words} not measured"
    digits = 3 if metric.endswith("_s") else 1
    interval = f" [{ci.low:.{digits}f}, {ci.high:.{digits}f}]" if ci.has_interval else " (n=1)"
    return f"{words} {ci.mean:.{digits}f}{interval}"


def _ratio_text(
    report: LoadReport,
    level: str,
    fig: LevelFigures,
    metric: str,
    by_label: dict[str, ConfigSummary],
) -> str:
    base = next((c.label for c in by_label.values() if c.is_baseline), None)
    ref = report.figure(base, level) if base is not None and base != fig.label else None
    mine, theirs = fig.mean(metric), None if ref is None else ref.mean(metric)
    if mine is None or not theirs:
        return ""
    return f", {mine / theirs:.2f}x {base}"


def _best_changes(recommendations: list[LoadRecommendation]) -> str | None:
    """Whether the recommended config is the same at every level (a leaning where a level
    is inconclusive)."""
    named = [(r.level, r.label) for r in recommendations if r.label is not None]
    if len(named) < 2:
        return None
    labels = list(dict.fromkeys(label for _, label in named))
    unsure = [r.level for r in recommendations if r.status == "inconclusive"]
    hedge = f" (a leaning: inconclusive at {', '.join(unsure)})" if unsure else ""
    if len(labels) == 1:
        return f"The same config is recommended at every load level{hedge}: {labels[0]}."
    parts = [f"{label} at {', '.join(lv for lv, lb in named if lb == label)}" for label in labels]
    return f"The recommended config changes with load{hedge}: " + "; ".join(parts) + "."
