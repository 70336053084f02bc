"""PNG plots of the load levels (matplotlib, Agg canvas, no pyplot global state).

    load_throughput.png  output tok/s (and goodput tok/s under an SLO) vs load, one line per config
    load_latency.png     p99 TTFT and p99 per-token ITL vs load (pooled over the repeats' requests)

Closed-loop levels are drawn against concurrency, open-loop ones against the
request rate, each in its own panel. See docs/report.md "How the report is built".
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ddtune.report.load.figures import LevelFigures, LoadReport
from ddtune.report.render.plots import Plot, save_plots

MAX_LINES = 10  # beyond this the legend is unreadable; the tables list every config


def write_load_plots(report: LoadReport, out_dir: Path) -> tuple[list[Plot], list[str]]:
    """Write the load plots; return them and a note per plot without data."""
    return save_plots([partial(maker, report) for maker in (_throughput, _latency)], out_dir)


def _loops(report: LoadReport) -> list[tuple[str, str]]:
    """[(loop, x-axis words)] for the loops measured."""
    found = {f.loop for f in report.figures}
    words = {"closed": "concurrency (clients)", "open": "request rate (req/s)"}
    return [(loop, words[loop]) for loop in ("closed", "open") if loop in found]


def _throughput(report: LoadReport) -> tuple[Figure, Plot] | str:
    loops = _loops(report)
    metrics = [("output_tps", "output tok/s")]
    if report.slo:
        metrics.append(("goodput_tps", "goodput tok/s (requests meeting the SLO)"))
    if not loops or not any(f.samples.get("output_tps") for f in report.figures):
        return "throughput vs load: no level measured"
    figure = _panels(report, loops, [(words, partial(_mean_ci, metric=m)) for m, words in metrics])
    caption = (
        "Aggregate over each level's measured requests; mean over repeats with 95% t-intervals."
    )
    return figure, Plot("load_throughput.png", "Throughput vs load", caption)


def _latency(report: LoadReport) -> tuple[Figure, Plot] | str:
    loops = _loops(report)
    metrics = [("ttft_s", "p99 time to first token (s)"), ("itl_s", "p99 inter-token latency (s)")]
    if not loops or not any(f.pooled.get("ttft_s") for f in report.figures):
        return "latency vs load: no level measured"
    figure = _panels(report, loops, [(words, partial(_p99, name=n)) for n, words in metrics])
    caption = "p99 pooled over the requests of every repeat (per-token gaps for ITL)."
    return figure, Plot("load_latency.png", "Tail latency vs load", caption)


Value = Callable[[LevelFigures], tuple[float, float, float] | None]  # (y, below, above)


def _panels(
    report: LoadReport, loops: list[tuple[str, str]], rows: list[tuple[str, Value]]
) -> Figure:
    """A panel per (row: y-axis words and value, loop): one line per config."""
    figure = Figure(figsize=(6 * len(loops), 4 * len(rows)), layout="constrained")
    axes = figure.subplots(len(rows), len(loops), squeeze=False)
    for row, (words, value) in enumerate(rows):
        for col, (loop, xlabel) in enumerate(loops):
            _lines(axes[row][col], report, loop, value)
            axes[row][col].set_xlabel(xlabel)
            axes[row][col].set_ylabel(words)
    return figure


def _lines(ax: Axes, report: LoadReport, loop: str, value: Value) -> None:
    labels = list(dict.fromkeys(f.label for f in report.figures))[:MAX_LINES]
    ticks = sorted({_x(f) for f in report.figures if f.loop == loop})
    for label in labels:
        points = []
        for fig in report.figures:
            if fig.label != label or fig.loop != loop:
                continue
            y = value(fig)
            if y is not None:
                points.append((_x(fig), *y))
        points.sort()
        if points:
            xs, ys, lo, hi = zip(*points, strict=True)
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=label)
    if loop == "closed":
        ax.set_xscale("log", base=2)
        ax.minorticks_off()
    ax.set_xticks(ticks, [f"{x:g}" for x in ticks])
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=7)


def _x(fig: LevelFigures) -> float:
    return float(fig.concurrency if fig.concurrency is not None else fig.rate or 0.0)


def _mean_ci(fig: LevelFigures, metric: str) -> tuple[float, float, float] | None:
    ci = fig.metrics.get(metric)
    if ci is None:
        return None
    below = 0.0 if ci.low is None else ci.mean - ci.low
    above = 0.0 if ci.high is None else ci.high - ci.mean
    return ci.mean, below, above


def _p99(fig: LevelFigures, name: str) -> tuple[float, float, float] | None:
    dist = fig.pooled.get(name)
    return None if dist is None else (dist.p99, 0.0, 0.0)


__all__ = ["write_load_plots"]
