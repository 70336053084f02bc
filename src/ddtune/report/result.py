"""`ReportSummary`: everything the report concluded, and the terse terminal table.

`build_report` returns one; the Markdown/HTML renderers, the CSV/JSON writers
and the CLI all read from it, so every output tells the same story.
See docs/report.md "How the report is built".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddtune.records import SweepContext
from ddtune.report.by_slot import SlotReport
from ddtune.report.load.figures import LoadReport
from ddtune.report.load.schedule import ScheduleReport
from ddtune.report.lossless import LosslessCheck
from ddtune.report.options import ReportOptions
from ddtune.report.recommend import PassRateComparison, Recommendation
from ddtune.report.render.plots import Plot
from ddtune.report.summarize import ConfigSummary
from ddtune.report.workloads import workload_lines
from ddtune.stats.intervals import VarianceComponents, format_ci

if TYPE_CHECKING:
    from ddtune.report.workloads import WorkloadReport


@dataclass
class ReportSummary:
    options: ReportOptions
    configs: list[ConfigSummary]
    baseline: str | None  # label of the baseline config, None when the sweep had none
    pass_rates: dict[str, PassRateComparison]  # label -> comparison with the best pass rate
    best_pass_rate: str | None
    lossless: dict[str, LosslessCheck]
    correctness_notes: dict[str, str]  # label -> "divergence: ..." / "noise: ..."
    pareto: list[str]
    recommendations: list[Recommendation]
    conditions: dict[str, list[str]]  # condition -> distinct values over completed trials
    warnings: list[str]
    notes: list[str]
    context: SweepContext = field(default_factory=SweepContext)
    variance: dict[str, VarianceComponents] = field(default_factory=dict)  # label -> by start
    plots: list[Plot] = field(default_factory=list)
    skipped_plots: list[str] = field(default_factory=list)  # why a plot has no data
    slots: SlotReport | None = None  # per service slot (sweeps on the ray backend)
    files: dict[str, Path] = field(
        default_factory=dict
    )  # "html", "markdown", "csv", "json", plot names
    load: LoadReport | None = None  # [bench.load] levels (report/load/)
    workloads: WorkloadReport | None = None  # per suite / traffic, and the mix (workloads.py)
    schedule: ScheduleReport | None = None  # the config per range of concurrent requests

    def config(self, label: str) -> ConfigSummary:
        for summary in self.configs:
            if summary.label == label:
                return summary
        raise KeyError(label)

    def recommendation(self, objective: str) -> Recommendation:
        for rec in self.recommendations:
            if rec.objective == objective:
                return rec
        raise KeyError(objective)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["options"] = self.options.to_dict()
        data["configs"] = [self._config_dict(s) for s in self.configs]
        data["files"] = {k: str(v) for k, v in self.files.items()}
        found = self.schedule  # `report.schedule`: [{"max_concurrency": n | None, "config"}]
        data["schedule"] = None if found is None else found.schedule.to_wire()
        data["schedule_choice"] = None if found is None else found.to_wire()
        return data

    def _config_dict(self, s: ConfigSummary) -> dict[str, Any]:
        """A config's summary plus its race history (None: it stayed in the race)."""
        exit_ = self.context.exit_of(s.label)
        return {
            **s.to_dict(),
            "eliminated_at_pass": None if exit_ is None else exit_.at_pass,
            "elimination_reason": None if exit_ is None else exit_.reason,
            "elimination_detail": None if exit_ is None else exit_.detail,
        }

    def terminal_table(self) -> str:
        """A terse fixed-width table plus one line per recommendation and warning."""
        headers = [
            "config",
            "done",
            "short tok/s",
            "long tok/s",
            "x base",
            "accept",
            "pass",
            "T=0",
            "pareto",
        ]
        rows = [self._terminal_row(s) for s in self.configs]
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
        lines.append("")
        for rec in self.recommendations:
            lines.append(f"{rec.description}: {rec.text}")
        if self.load is not None:
            lines += load_lines(self.load)
        if self.schedule is not None:
            lines.append(self.schedule.text)
        if self.workloads is not None:
            lines += workload_lines(self.workloads, self.configs)
        lines += [f"WARNING: {w}" for w in self.warnings]
        return "\n".join(lines)

    def _terminal_row(self, s: ConfigSummary) -> list[str]:
        ratio = s.ratios.get("throughput_tps")
        coding = "-" if s.coding is None else f"{s.coding.passed}/{s.coding.total}"
        verdict = self.lossless.get(s.label)
        return [
            s.label + (" (baseline)" if s.is_baseline else ""),
            f"{s.done}/{s.trials}",
            format_ci(s.metrics.get("short_tps")),
            format_ci(s.metrics.get("long_tps")),
            "1" if s.is_baseline else ("-" if ratio is None else f"{ratio.mean:.2f}"),
            format_ci(s.metrics.get("acceptance_length"), digits=2),
            coding,
            "-" if verdict is None else verdict.status,
            "yes" if s.label in self.pareto else "",
        ]


def load_lines(load: LoadReport) -> list[str]:
    """The load recommendations, mix, crossovers and serialisation for the terminal."""
    lines = [f"under load {rec.text}" for rec in load.recommendations]
    if load.mix is not None:
        lines.append(load.mix.text)
    return lines + load.crossovers + [f"NOTE: {s}" for s in load.serialisation]
