"""Per workload (bench suites, the user's traffic): the figures, and whether one config serves all.

`workload_report(summary)` reads the per-workload metrics of the config
summaries (`"humaneval/tps"`, ...) and the recommendations of `recommend.py`
(one per workload, one for the mix) and says whether the mix's choice is
within `tolerance` of each workload's own best, or which workload would lose
how much under it. `workload_section` is the report's "Workloads" section;
`workload_lines` the terminal's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ddtune.records import workload_metric
from ddtune.report.recommend import MIX, Recommendation, workload_objective
from ddtune.report.render.document import Block, Cell, Paragraph, Section, Table
from ddtune.report.summarize import ConfigSummary, workload_names

if TYPE_CHECKING:
    from ddtune.report.options import ReportOptions


class Summarized(Protocol):
    """What the workload view reads of a report (`result.ReportSummary` is one; naming only
    this keeps workloads below the result that holds its figures)."""

    options: ReportOptions
    configs: list[ConfigSummary]
    recommendations: list[Recommendation]
    workloads: WorkloadReport | None

    def config(self, label: str) -> ConfigSummary: ...


@dataclass
class WorkloadReport:
    names: list[str]
    mix_label: str | None  # the mix's recommended config
    losses: dict[str, tuple[str, float]] = field(default_factory=dict)  # workload -> best, loss
    finding: str = ""


def workload_report(summary: Summarized) -> WorkloadReport | None:
    names = workload_names(summary.configs)
    recs = {r.objective: r for r in summary.recommendations}
    if names in ([], ["bundled"]) or MIX not in recs:
        return None
    report = WorkloadReport(names, recs[MIX].label)
    for name in names:
        own = recs.get(workload_objective(name))
        loss = _loss(summary, report.mix_label, own, name)
        if own is not None and own.label is not None and loss is not None:
            report.losses[name] = (own.label, loss)
    report.finding = _finding(report, summary.options.tolerance)
    open_ = [
        n for n in names if (r := recs.get(workload_objective(n))) and r.status == "inconclusive"
    ]
    if open_ and report.losses:
        report.finding += f" (By the means: not decided yet for {', '.join(open_)}.)"
    return report


def _loss(
    summary: Summarized, chosen: str | None, own: Recommendation | None, name: str
) -> float | None:
    """How much slower the mix's config is on `name` than that workload's own choice."""
    if chosen is None or own is None or own.label is None:
        return None
    metric = workload_metric(name, "tps")
    mine, best = summary.config(chosen).mean(metric), summary.config(own.label).mean(metric)
    return None if mine is None or not best else max(0.0, 1 - mine / best)


def _finding(report: WorkloadReport, tolerance: float) -> str:
    if report.mix_label is None:
        return "No config measured every workload of the mix."
    losing = {n: v for n, v in report.losses.items() if v[1] > 1 - 1 / (1 + tolerance)}
    if not losing:
        return (
            f"One config serves every workload: {report.mix_label} is within "
            f"{tolerance:.0%} of each workload's own best ({', '.join(report.names)})."
        )
    parts = [
        f"{name} would lose {loss:.0%} (its best: {best})" for name, (best, loss) in losing.items()
    ]
    return f"Under the mix's choice, {report.mix_label}: " + "; ".join(parts) + "."


def workload_section(summary: Summarized) -> Section:
    report = summary.workloads
    if report is None:
        return Section("Workloads", [])
    headers = ["config"] + [f"{n} tok/s | τ | pass" for n in report.names]
    rows: list[list[Cell]] = [
        [s.label, *(_cell(s, n) for n in report.names)] for s in summary.configs if s.done
    ]
    blocks: list[Block] = [Paragraph(report.finding), Table(headers, rows)]
    recs = [r for r in summary.recommendations if r.objective.startswith("workload:")]
    blocks += [Paragraph(f"{r.objective.removeprefix('workload:')}: {r.text}") for r in recs]
    return Section("Workloads", blocks)


def workload_lines(report: WorkloadReport, configs: Sequence[ConfigSummary]) -> list[str]:
    """The per-workload figures and the finding, for the terminal."""
    lines = ["per workload (tok/s | τ | pass):"]
    for s in configs:
        if s.done:
            cells = "  ".join(f"{n} {_cell(s, n)}" for n in report.names)
            lines.append(f"  {s.label}: {cells}")
    return [*lines, report.finding]


def _cell(s: ConfigSummary, name: str) -> str:
    tps, tau = (
        s.mean(workload_metric(name, "tps")),
        s.mean(workload_metric(name, "acceptance_length")),
    )
    score = s.scores.get(name)
    parts = [
        "-" if tps is None else f"{tps:.1f}",
        "-" if tau is None else f"{tau:.2f}",
        "-" if score is None else f"{score.passed}/{score.total}",
    ]
    return " | ".join(parts)
