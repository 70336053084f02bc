"""Decisions per load level: one recommendation per level, one for `load_weights`,
the AR/DFlash/DDTree crossover sentences, and the serialisation warning.

Objective at a level: goodput tok/s when the levels ran against an SLO, else
output tok/s (closed loop) or mean e2e latency (open loop, where every config
that keeps up delivers the offered rate). The rules are the report's own
(docs/architecture.md "Report", decision rules), applied per level: means
within `tie_tolerance` of the best tie and the cheaper config wins; the winner
is "recommended" when the Welch interval of its difference to every other
config excludes 0, else "inconclusive" naming the contenders; configs whose
pass rate is significantly below the best (or not measured while others are)
are not eligible. The load mix scores each repeat by the weighted mean of its
level values relative to the best mean at each level.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ddtune.report.decide import PassRateComparison
from ddtune.report.inputs import TrialRecord
from ddtune.report.load import (
    LevelFigures,
    LoadRecommendation,
    LoadReport,
    level_figures,
    max_rates,
)
from ddtune.report.load_findings import crossovers, serialisation
from ddtune.report.options import ReportOptions
from ddtune.report.statistics import welch_difference
from ddtune.report.summarize import ConfigSummary, Cost

Objective = tuple[str, bool, str]  # figure, higher is better, words


def analyze_load(
    records: Sequence[TrialRecord],
    configs: Sequence[ConfigSummary],
    pass_rates: dict[str, PassRateComparison],
    options: ReportOptions,
) -> LoadReport | None:
    """Everything the report says about load levels; None when no trial ran any."""
    report = level_figures(records, options.confidence)
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
    report.crossovers = crossovers(report, configs)
    report.serialisation = serialisation(report)
    report.best_changes = _best_changes(report.recommendations)
    return report


def objective(report: LoadReport, level: str) -> Objective:
    if report.slo:
        return "goodput_tps", True, "goodput tok/s"
    if level.startswith("r"):
        return "e2e_mean_s", False, "mean e2e latency s"
    return "output_tps", True, "output tok/s"


def decide(
    samples: dict[str, list[float]],
    higher: bool,
    cost: Callable[[str], Cost],
    options: ReportOptions,
) -> tuple[str | None, list[str], list[str]]:
    """(winner, contenders not separated from it, configs tied or practically equal)."""
    means = {k: sum(v) / len(v) for k, v in samples.items() if v}
    if not means:
        return None, [], []
    tol = options.tie_tolerance

    def near(value: float, ref: float) -> bool:
        return value >= ref * (1 - tol) if higher else value <= ref * (1 + tol)

    best = (max if higher else min)(means.values())
    tied = [k for k, v in means.items() if near(v, best)]
    winner = min(tied, key=lambda k: (cost(k), k))
    equal = [k for k, v in means.items() if k not in tied and near(v, means[winner])]
    others = [k for k in means if k not in tied and k not in equal]
    contenders = [
        k
        for k in others
        if not welch_difference(samples[winner], samples[k], options.confidence).separated
    ]
    return winner, contenders, [k for k in tied + equal if k != winner]


def _level_recommendation(
    report: LoadReport,
    level: str,
    candidates: list[LevelFigures],
    by_label: dict[str, ConfigSummary],
    options: ReportOptions,
) -> LoadRecommendation:
    metric, higher, words = objective(report, level)
    samples = {f.label: f.samples.get(metric, []) for f in candidates if f.samples.get(metric)}
    winner, contenders, ties = decide(samples, higher, lambda k: _cost(by_label, k), options)
    if winner is None:
        return LoadRecommendation(level, metric, "no data", None, f"{level}: no data for {words}.")
    fig = next(f for f in candidates if f.label == winner)
    value = _value_text(fig, metric, words) + _ratio_text(report, level, fig, metric, by_label)
    tie = (
        f" {len(ties)} other config(s) within {options.tie_tolerance:.0%}: the cheaper is preferred."
        if ties
        else ""
    )
    serial = (
        " The server serialised requests here: queueing, not the config, sets the latency."
        if fig.is_serialised
        else ""
    )
    if not contenders:
        return LoadRecommendation(
            level, metric, "recommended", winner, f"{level}: {winner} ({value}).{tie}{serial}"
        )
    names = ", ".join(contenders[:4]) + (
        f" and {len(contenders) - 4} more" if len(contenders) > 4 else ""
    )
    text = f"{level}: inconclusive: {winner} ({value}) cannot be separated from {names}; leaning {winner}.{tie}{serial}"
    return LoadRecommendation(level, metric, "inconclusive", winner, text, contenders)


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
    winner, contenders, _ = decide(scores, True, lambda k: _cost(by_label, k), options)
    return _mix_text(weights, scores, winner, contenders)


def _mix_text(
    weights: dict[str, float],
    scores: dict[str, list[float]],
    winner: str | None,
    contenders: list[str],
) -> LoadRecommendation:
    words = "load mix (" + ", ".join(f"{k} {w:g}" for k, w in weights.items()) + ")"
    if winner is None:
        text = f"{words}: no config measured every weighted level."
        return LoadRecommendation("mix", "mix_score", "no data", None, text)
    score = sum(scores[winner]) / len(scores[winner])
    if not contenders:
        text = f"{words}: {winner} (score {score:.3f} of the best at each level)."
        return LoadRecommendation("mix", "mix_score", "recommended", winner, text)
    text = (
        f"{words}: inconclusive: {winner} (score {score:.3f}) cannot be separated from "
        f"{', '.join(contenders[:4])}; leaning {winner}."
    )
    return LoadRecommendation("mix", "mix_score", "inconclusive", winner, text, contenders)


def _mix_scores(
    report: LoadReport, weights: dict[str, float], eligible: Callable[[str], bool]
) -> dict[str, list[float]]:
    """Per config, one score per repeat: sum of weight x value relative to the level's best."""
    total = sum(weights.values())
    per_level: dict[str, dict[str, list[float]]] = {}
    for level in weights:
        metric, higher, _ = objective(report, level)
        values = {f.label: f.samples.get(metric, []) for f in report.at(level) if eligible(f.label)}
        means = [sum(v) / len(v) for v in values.values() if v]
        if not means:
            return {}
        best = max(means) if higher else min(means)
        per_level[level] = {
            k: [(x / best if higher else best / x) if x and best else 0.0 for x in v]
            for k, v in values.items()
            if v
        }
    labels = set.intersection(*(set(v) for v in per_level.values()))
    scores = {}
    for label in sorted(labels):
        n = min(len(per_level[level][label]) for level in weights)
        scores[label] = [
            sum(weights[lv] * per_level[lv][label][i] for lv in weights) / total for i in range(n)
        ]
    return scores


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
    """Whether the recommended config is the same at every level."""
    named = [(r.level, r.label) for r in recommendations if r.label is not None]
    if len(named) < 2:
        return None
    labels = list(dict.fromkeys(label for _, label in named))
    if len(labels) == 1:
        return f"The same config is recommended at every load level: {labels[0]}."
    parts = [f"{label} at {', '.join(lv for lv, lb in named if lb == label)}" for label in labels]
    return "The recommended config changes with load: " + "; ".join(parts) + "."
