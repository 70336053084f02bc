"""The two plots of the verdict (matplotlib, Agg canvas, no pyplot global state).

    forest.png  each config's ratio to the baseline (the sweep objective's metric) with its interval, sorted
                (a forest plot); the recommended config in green, the band within the
                equivalence tolerance of it shaded, configs that left a race in grey
    race.png    the race pass by pass: one lane per config from pass 1 to the pass it
                left (marked with why) or to the last pass run

Shown with the answer (forest) and in the race section (race). A plot without
data is skipped with a note, as in `plots.py`. See docs/report.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ddtune.records import SweepContext
from ddtune.report.render.plots import Made, Plot, save_plots
from ddtune.report.summarize import THROUGHPUT, ConfigSummary

FOREST = "forest.png"  # shown with the answer
RACE = "race.png"  # shown in the race section
TITLES = {FOREST: "Every config against the baseline", RACE: "The race, pass by pass"}
REASON_COLOURS = {"worse": "tab:red", "pass_rate": "tab:orange", "failed": "black"}
REASON_WORDS = {"worse": "slower", "pass_rate": "pass rate", "failed": "failed"}


def write_verdict_plots(
    configs: Sequence[ConfigSummary],
    context: SweepContext,
    verdict: tuple[str, str | None, float, str],
    out_dir: Path,
) -> tuple[list[Plot], list[str]]:
    """forest.png and race.png into `out_dir`; the plots and a note per skipped one.

    `verdict` = (the objective's metric, the recommended config, the tolerance, and the
    word its tick gets: "run this", or "leading" while not decided)."""
    makers = [partial(forest, configs, context, *verdict)]
    if context.race:
        makers.append(partial(race_lanes, configs, context))
    return save_plots(makers, out_dir)


def forest(
    configs: Sequence[ConfigSummary],
    context: SweepContext,
    metric: str,
    recommended: str | None,
    tolerance: float,
    word: str = "run this",
) -> Made:
    rows = [(s, r) for s in configs if (r := s.ratios.get(metric)) is not None]
    if not rows:
        return "forest plot: no ratio to a baseline (no baseline, or nothing measured)"
    rows.sort(key=lambda sr: sr[1].mean)
    figure = Figure(figsize=(9, 0.34 * len(rows) + 1.5), layout="constrained")
    ax = figure.subplots()
    ax.axvline(1.0, color="grey", linestyle="--", linewidth=1)
    chosen = next((r for s, r in rows if s.label == recommended), None)
    if chosen is not None:
        low, high = chosen.mean / (1 + tolerance), chosen.mean * (1 + tolerance)
        ax.axvspan(low, high, color="tab:green", alpha=0.12, label=f"within ±{tolerance:.0%}")
    for y, (s, ratio) in enumerate(rows):
        colour = _colour(s.label, context, recommended)
        low = ratio.mean - (ratio.low if ratio.low is not None else ratio.mean)
        high = (ratio.high if ratio.high is not None else ratio.mean) - ratio.mean
        ax.errorbar(ratio.mean, y, xerr=[[low], [high]], fmt="o", color=colour, capsize=3)
        ax.annotate(
            f"{ratio.mean:.2f}×",
            (ratio.mean + high, y),
            xytext=(5, -3),
            textcoords="offset points",
            fontsize=8,
            color=colour,
        )
    ticks = [_tick(s.label, context, recommended, word) for s, _ in rows]
    ax.set_yticks(range(len(rows)), ticks)
    ax.tick_params(axis="y", labelsize=8)
    words = "throughput" if metric == THROUGHPUT else metric.replace("_tps", "-context tok/s")
    ax.set_xlabel(f"{words} ÷ baseline (95% interval); dashed: the baseline")
    ax.grid(axis="x", alpha=0.3)
    if chosen is not None:
        ax.legend(fontsize=8, loc="lower right")
    caption = (
        "Each config's ratio to the baseline, sorted; green: the recommended config "
        "and the band within the equivalence tolerance of it; grey: left the race."
    )
    return figure, Plot(FOREST, TITLES[FOREST], caption)


def race_lanes(configs: Sequence[ConfigSummary], context: SweepContext) -> Made:
    if context.passes < 1:
        return "race plot: no pass finished yet"
    lanes = sorted(configs, key=lambda s: _lane_key(s, context))
    height = 0.3 * len(lanes) + 1.6
    figure = Figure(figsize=(9, height), layout="constrained")
    ax = figure.subplots()
    for y, s in enumerate(lanes):
        _lane(ax, y, s.label, context)
    ticks = [s.label + (" (baseline)" if s.is_baseline else "") for s in lanes]
    ax.set_yticks(range(len(lanes)), ticks)
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlim(0.5, context.passes + 0.9)
    ax.set_xticks(range(1, context.passes + 1))
    ax.set_xlabel("pass")
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    left = len(context.exits)
    caption = (
        f"{context.passes} pass(es); {left} config(s) left the race (x: the pass they left, "
        "and why), the rest raced to the last pass run (green)."
    )
    return figure, Plot(RACE, TITLES[RACE], caption)


def _lane(ax: Axes, y: int, label: str, context: SweepContext) -> None:
    exit_ = context.exit_of(label)
    end = context.passes if exit_ is None else exit_.at_pass
    colour = "tab:green" if exit_ is None else "silver"
    ax.plot([1, end], [y, y], color=colour, linewidth=5, solid_capstyle="round")
    if exit_ is None:
        return
    mark = REASON_COLOURS.get(exit_.reason, "black")
    ax.plot([end], [y], marker="X", markersize=9, color=mark)
    ax.annotate(
        REASON_WORDS.get(exit_.reason, exit_.reason),
        (end, y),
        xytext=(7, -3),
        textcoords="offset points",
        fontsize=7,
        color=mark,
    )


def _lane_key(s: ConfigSummary, context: SweepContext) -> tuple[int, str]:
    """Configs still in the race first, then by the pass they left (latest first)."""
    exit_ = context.exit_of(s.label)
    return (0 if exit_ is None else -exit_.at_pass + 10_000, s.label)


def _colour(label: str, context: SweepContext, recommended: str | None) -> str:
    if label == recommended:
        return "tab:green"
    return "grey" if context.exit_of(label) is not None else "tab:blue"


def _tick(label: str, context: SweepContext, recommended: str | None, word: str) -> str:
    if label == recommended:
        return f"{label}  ({word})"
    exit_ = context.exit_of(label)
    return label if exit_ is None else f"{label}  (left at pass {exit_.at_pass})"
