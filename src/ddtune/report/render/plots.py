"""PNG plots of a sweep (matplotlib, Agg canvas, no pyplot global state).

    tps_vs_budget.png         short and long tok/s vs tree budget, one line per topk (CI bars)
    acceptance_vs_budget.png  mean acceptance length vs budget, and its per-request distribution
    tps_vs_acceptance.png     tok/s against mean acceptance length, one point per config
    pass_rate.png             coding pass rate per config with Wilson intervals

ddtree configs form lines over budget; ar and dflash configs (no budget) are
drawn as horizontal reference lines. A plot without data is skipped, with a note.
See docs/report.md "How the report is built".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ddtune.report.render.atomic import atomic_path
from ddtune.report.summarize import ConfigSummary
from ddtune.stats.intervals import MeanCI

DPI = 100
MAX_ANNOTATED = 12  # label points by config only up to this many


@dataclass
class Plot:
    name: str  # file name inside the output directory
    title: str
    caption: str


Made = tuple[Figure, Plot] | str  # a plot, or the note saying why it has no data


def write_plots(summaries: Sequence[ConfigSummary], out_dir: Path) -> tuple[list[Plot], list[str]]:
    """Write every plot that has data; return the plots and a note per skipped one."""
    makers = (_tps_vs_budget, _acceptance_vs_budget, _tps_vs_acceptance, _pass_rate)
    return save_plots([partial(maker, summaries) for maker in makers], out_dir)


def save_plots(makers: Sequence[Callable[[], Made]], out_dir: Path) -> tuple[list[Plot], list[str]]:
    """Run each maker; save its figure as `out_dir / plot.name`, or keep its note."""
    plots, notes = [], []
    for maker in makers:
        made = maker()
        if isinstance(made, str):
            notes.append(made)
            continue
        figure, plot = made
        with atomic_path(out_dir / plot.name) as tmp:
            figure.savefig(tmp, dpi=DPI, format="png")  # constrained layout: no "tight" redraw
        plots.append(plot)
    return plots, notes


def _tps_vs_budget(summaries: Sequence[ConfigSummary]) -> tuple[Figure, Plot] | str:
    metrics = [
        (m, t)
        for m, t in (("short_tps", "short context"), ("long_tps", "long context"))
        if _has(summaries, m)
    ]
    if not metrics:
        return "tok/s vs budget: no tok/s measured"
    figure = Figure(figsize=(6 * len(metrics), 4.2), layout="constrained")
    for ax, (metric, title) in zip(
        figure.subplots(1, len(metrics), squeeze=False)[0], metrics, strict=True
    ):
        _lines_over_budget(ax, summaries, metric)
        ax.set_title(f"tok/s, {title}")
        ax.set_ylabel("decode tok/s")
    caption = "Mean over repeats with 95% t-intervals; dashed lines: configs without a tree budget."
    return figure, Plot("tps_vs_budget.png", "Throughput vs tree budget", caption)


def _acceptance_vs_budget(summaries: Sequence[ConfigSummary]) -> tuple[Figure, Plot] | str:
    if not _has(summaries, "acceptance_length"):
        return "acceptance length vs budget: no acceptance length measured"
    with_dist = [s for s in summaries if s.acceptance is not None]
    panels = 2 if with_dist else 1
    figure = Figure(figsize=(6 * panels, 4.2), layout="constrained")
    axes = figure.subplots(1, panels, squeeze=False)[0]
    _lines_over_budget(axes[0], summaries, "acceptance_length")
    axes[0].set_title("mean acceptance length")
    axes[0].set_ylabel("tokens per verify round (incl. bonus)")
    if with_dist:
        _acceptance_boxes(axes[1], with_dist)
    caption = "Left: mean over repeats with 95% t-intervals. Right: per-request distribution (quartiles, min-max)."
    return figure, Plot("acceptance_vs_budget.png", "Acceptance length vs tree budget", caption)


def _tps_vs_acceptance(summaries: Sequence[ConfigSummary]) -> tuple[Figure, Plot] | str:
    rows = [s for s in summaries if s.mean("acceptance_length") is not None]
    metrics = [m for m in ("short_tps", "long_tps") if any(s.mean(m) is not None for s in rows)]
    if not rows or not metrics:
        return "tok/s vs acceptance length: needs both measured"
    figure = Figure(figsize=(7, 4.6), layout="constrained")
    ax = figure.subplots()
    for metric, marker in zip(metrics, ("o", "s"), strict=False):
        points = [s for s in rows if s.mean(metric) is not None]
        xs = [s.ci("acceptance_length").mean for s in points]
        ys = [s.ci(metric).mean for s in points]
        yerr = _errors([s.ci(metric) for s in points])
        label = metric.replace("_tps", " context")
        ax.errorbar(xs, ys, yerr=yerr, fmt=marker, capsize=3, alpha=0.8, label=label)
        if len(points) > MAX_ANNOTATED:
            continue  # labels would pile up; the tables name every config
        for s, x, y in zip(points, xs, ys, strict=True):
            ax.annotate(
                _short(s.label), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points"
            )
    ax.set_xlabel("mean acceptance length")
    ax.set_ylabel("decode tok/s")
    ax.legend()
    ax.grid(alpha=0.3)
    caption = "One point per config; bars are 95% t-intervals of tok/s."
    return figure, Plot("tps_vs_acceptance.png", "Throughput vs acceptance length", caption)


def _pass_rate(summaries: Sequence[ConfigSummary]) -> tuple[Figure, Plot] | str:
    rows = [(s.label, s.coding) for s in summaries if s.coding is not None]
    if not rows:
        return "pass rate: no coding results"
    figure = Figure(figsize=(7, 0.45 * len(rows) + 1.4), layout="constrained")
    ax = figure.subplots()
    ys = list(range(len(rows)))
    rates = [c.rate for _, c in rows]
    err = [
        [max(0.0, c.rate - c.low) for _, c in rows],
        [max(0.0, c.high - c.rate) for _, c in rows],
    ]
    ax.errorbar(rates, ys, xerr=err, fmt="o", capsize=4, color="tab:green")
    ax.set_yticks(ys, [f"{label}  {c.passed}/{c.total}" for label, c in rows], fontsize=8)
    ax.set_xlim(-0.02, 1.02)
    ax.invert_yaxis()
    ax.set_xlabel("coding pass rate (95% Wilson interval)")
    ax.grid(axis="x", alpha=0.3)
    return figure, Plot(
        "pass_rate.png", "Coding pass rate", "Pooled over repeats; bars are 95% Wilson intervals."
    )


def _lines_over_budget(ax: Axes, summaries: Sequence[ConfigSummary], metric: str) -> None:
    series: dict[str, list[ConfigSummary]] = {}
    for s in summaries:
        mean = s.mean(metric)
        if mean is None:
            continue
        if s.params.mode == "ddtree":
            series.setdefault(_series_name(s), []).append(s)
        else:
            ax.axhline(
                mean,
                linestyle="--",
                linewidth=1,
                color="grey" if s.is_baseline else "tab:purple",
            )
            ax.annotate(
                s.label,
                (0, mean),
                xycoords=("axes fraction", "data"),
                fontsize=7,
                xytext=(3, 2),
                textcoords="offset points",
            )
    for i, (name, points) in enumerate(sorted(series.items())):
        points.sort(key=lambda s: s.cost)
        cis = [s.ci(metric) for s in points]
        dodge = 2 ** (
            (i - (len(series) - 1) / 2) * 0.05
        )  # shift series apart so bars don't overlap
        xs = [max(s.params.budget, 1) * dodge for s in points]
        ax.errorbar(
            xs, [ci.mean for ci in cis], yerr=_errors(cis), marker="o", capsize=3, label=name
        )
    budgets = sorted({max(s.params.budget, 1) for p in series.values() for s in p})
    if budgets:
        ax.set_xscale("log", base=2)
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.minorticks_off()
    ax.set_xlabel("tree budget B (log scale)")
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=8)


def _acceptance_boxes(ax: Axes, rows: list[ConfigSummary]) -> None:
    boxes = [
        {
            "label": _short(s.label),
            "med": a.median,
            "q1": a.p25,
            "q3": a.p75,
            "whislo": a.minimum,
            "whishi": a.maximum,
        }
        for s in rows
        if (a := s.acceptance) is not None
    ]
    ax.bxp(boxes, showfliers=False)
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    ax.set_title("acceptance length per request")


def _errors(cis: Sequence[MeanCI]) -> list[list[float]]:
    """Asymmetric error bars; zero-length where n = 1 (no interval)."""
    low = [0.0 if ci.low is None else ci.mean - ci.low for ci in cis]
    high = [0.0 if ci.high is None else ci.high - ci.mean for ci in cis]
    return [low, high]


def _series_name(s: ConfigSummary) -> str:
    """One line per (topk, window); the whole-context window is the unnamed default."""
    window = s.params.window
    return f"topk {s.params.topk}" + ("" if window is None else f", window {window}")


def _short(label: str) -> str:
    return label.replace("ddtree ", "").replace(" wnone", "")


def _has(summaries: Sequence[ConfigSummary], metric: str) -> bool:
    return any(s.mean(metric) is not None for s in summaries)
