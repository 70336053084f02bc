"""The report's "Predicted vs measured" section: what the forecast said of each config, beside the data.

A predicting sweep (a trace, or for n-gram the baseline's own T = 0 answers)
hands its predictions over in `SweepContext.predictions`
(`ddtune.records.PredictedConfig`): the acceptance length as the service counts
it and the objective's tok/s from the round-cost model, with what became of the
config (started, dominated, predicted out) and the check the race made of it at
its start (against a model fitted without it). The lead counts the measured
configs that landed inside their predictions; a measured acceptance more than
`TAU_MISS` from the forecast's, or an objective outside the predicted interval,
is marked "miss". A predicting race that fell back to racing every config says
why first. See docs/report.md.
"""

from __future__ import annotations

from ddtune.records import PredictedConfig
from ddtune.report.render.document import Block, Cell, Paragraph, Section, Table
from ddtune.report.result import ReportSummary
from ddtune.report.summarize import OBJECTIVE_METRICS, THROUGHPUT, ConfigSummary

TAU_MISS = 0.05
TITLE = "Predicted vs measured"


def predicted_section(summary: ReportSummary) -> Section:
    context = summary.context
    if not context.predictions:
        return Section(TITLE, [])
    # a mix is predicted as the geometric mean over workloads (`CostModel.objective`): throughput
    mix = context.objective == "mix"
    metric = THROUGHPUT if mix else OBJECTIVE_METRICS.get(context.objective, THROUGHPUT)
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
        "checked at its start",
    ]
    blocks: list[Block] = [Paragraph(_lead(summary))]
    if context.fallback is not None:
        blocks.append(
            Paragraph(
                f"The prediction missed: {context.fallback}. Every config "
                "the forecast had left out raced as without one.",
                warning=True,
            )
        )
    blocks.append(Table(headers, rows))
    return Section(TITLE, blocks)


def _lead(summary: ReportSummary) -> str:
    context = summary.context
    started = [p for p in context.predictions if p.status == "started"]
    checked = [p for p in started if p.check and "measured" in p.check]
    inside = [p for p in checked if "apart" not in p.check and "outside" not in p.check]  # type: ignore[operator]
    landed = (
        f" {len(inside)} of the {len(checked)} checked landed inside their predictions, each "
        "checked at its start against a model fitted without it."
        if checked
        else ""
    )
    return (
        f"{context.predicted_from[:1].upper()}{context.predicted_from[1:]} predicted every "
        "config's rounds (T = 0); a round-cost model "
        f"fitted on the measured trials gave each its tok/s. {len(started)} of "
        f"{len(context.predictions)} configs were measured.{landed} 'agrees' compares each "
        f"measured config with the final model (acceptance within {TAU_MISS:.0%}, tok/s inside "
        "the interval, which holds a start's own spread, and every measured config)."
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
        p.check or "-",
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
