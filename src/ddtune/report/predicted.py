"""The report's "Predicted vs measured" section: what a trace said of each config, beside the data.

A sweep with `[sweep] trace` hands its predictions over in
`SweepContext.predictions` (`ddtune.records.PredictedConfig`): the acceptance
length as the service counts it and the objective's tok/s from the round-cost
model, with what became of the config (started, dominated, predicted out).
Each measured config's figures stand beside them; a measured acceptance more
than `TAU_MISS` from the trace's, or an objective outside the predicted
interval, is marked "miss". A predicting race that fell back to racing every
config says why first. See docs/report.md.
"""

from __future__ import annotations

from ddtune.records import PredictedConfig
from ddtune.report.render.document import Block, Cell, Paragraph, Section, Table
from ddtune.report.result import ReportSummary
from ddtune.report.summarize import THROUGHPUT, ConfigSummary

TAU_MISS = 0.05
OBJECTIVE_METRIC = {
    "throughput": THROUGHPUT,
    "speedup": THROUGHPUT,
    "long_context": "long_tps",
    "short_context": "short_tps",
}
TITLE = "Predicted vs measured"


def predicted_section(summary: ReportSummary) -> Section:
    context = summary.context
    if not context.predictions:
        return Section(TITLE, [])
    metric = OBJECTIVE_METRIC.get(context.objective, THROUGHPUT)
    by_label = {s.label: s for s in summary.configs}
    rows = [_row(p, by_label.get(p.label), metric) for p in context.predictions]
    headers = [
        "config",
        "status",
        "tau predicted",
        "tau measured",
        "tok/s predicted [95%]",
        "tok/s measured",
        "agrees",
    ]
    blocks: list[Block] = [Paragraph(_lead(summary))]
    if context.fallback is not None:
        blocks.append(
            Paragraph(
                f"The prediction missed: {context.fallback}. Every config "
                "the trace had left out raced as without a trace.",
                warning=True,
            )
        )
    blocks.append(Table(headers, rows))
    return Section(TITLE, blocks)


def _lead(summary: ReportSummary) -> str:
    context = summary.context
    started = sum(1 for p in context.predictions if p.status == "started")
    return (
        f"A trace (T = 0) fixed every config's rounds; a round-cost model fitted on the "
        f"measured trials gave each its tok/s. {started} of {len(context.predictions)} configs "
        "were measured; 'agrees' compares each measured config with its prediction "
        f"(acceptance within {TAU_MISS:.0%}, tok/s inside the interval, which holds a start's "
        "own spread; the model now includes every measured config)."
    )


def _row(p: PredictedConfig, s: ConfigSummary | None, metric: str) -> list[Cell]:
    tau_measured = s.mean("acceptance_length") if s is not None else None
    value = s.mean(metric) if s is not None else None
    cells: list[Cell] = [
        p.label,
        p.status,
        "-" if p.acceptance is None else f"{p.acceptance:.3f}",
        "-" if tau_measured is None else f"{tau_measured:.3f}",
        "-"
        if p.objective is None
        else f"{p.objective[0]:.1f} [{p.objective[1]:.1f}, {p.objective[2]:.1f}]",
        "-" if value is None else f"{value:.1f}",
        _agrees(p, tau_measured, value),
    ]
    return cells


def _agrees(p: PredictedConfig, tau: float | None, value: float | None) -> str:
    if tau is None and value is None:
        return "-"
    misses = []
    if tau is not None and p.acceptance is not None and abs(tau / p.acceptance - 1) > TAU_MISS:
        misses.append("tau")
    if (
        value is not None
        and p.objective is not None
        and not p.objective[1] <= value <= p.objective[2]
    ):
        misses.append("tok/s")
    return "yes" if not misses else "miss: " + ", ".join(misses)


__all__ = ["TAU_MISS", "TITLE", "predicted_section"]
