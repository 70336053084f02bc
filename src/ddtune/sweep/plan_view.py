"""`ddtune sweep plan SPEC`: a plan that shows its work, before anything is stopped.

    view = plan_view(spec, run_store, costs_from=None, everything=False)
    print(plan_text(view.document, console), end="")   # exit 2 unless view.ok

One document (`report.render.document`: sections of paragraphs, lines and tables),
one small function a section, one tiny renderer (rich, as the other commands print):

    the estimate      the costs, how a race runs and why, the strategy's cases, a bench's
                      requests (what `sweep run` prints first)
    How it runs       the strategy's own words (`Strategy.how_it_runs`): starts, benches,
                      passes, when it stops
    Limits            each cap the spec sets (max_hours, max_trials, repeats) against what
                      the sweep needs without it (`Strategy.span`, the cost model of
                      `plan/costs.py`) and what a cut race reports
    Predicted         with a `[sweep] trace`: predict, then confirm's starts and hours beside
                      the race's (`strategies/predict_path.py`); or the spec line that
                      would take that path
    Configs           a table of every config (the first `SHOWN` and a count of the rest)
    planned now       the trials known before the first one runs
    the engine check  every planned launch command past the engine's own parser

See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.table import Table as RichTable
from rich.text import Text

from ddtune.bench.suites.plan import bench_shares, share_text
from ddtune.records import TrialRecord
from ddtune.report.render.document import (
    Block,
    Bullets,
    Cell,
    Document,
    Paragraph,
    Section,
    Table,
)
from ddtune.services.engine_check import check_launches
from ddtune.sweep.checks import check_before_stopping, planned_launches
from ddtune.sweep.plan import Sweep, prepare
from ddtune.sweep.plan.costs import Estimate, Span, TrialCosts, format_duration, restart_word
from ddtune.sweep.plan.predictions import store_observations
from ddtune.sweep.plan.strategies.predict import PredictingRace
from ddtune.sweep.plan.strategies.predict_path import (
    PredictedPath,
    outputs_path,
    outputs_words,
    predicted_path,
    unpredictable,
)
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.records import trial_records
from ddtune.trace.forecast import Forecast
from ddtune.trace.round_cost import CostModel

SHOWN = 20  # configs in the table unless --all
SHOWN_TRIALS = 30  # trials listed unless --all
UNDECIDED = (
    'a race stopped by a limit is reported as not decided yet: "Leaning <the leader>; not '
    'yet separated from <the rest>"'
)


@dataclass
class PlanView:
    document: Document
    ok: bool  # the engine accepted every launch command (or has no check of its own)


def plan_view(
    spec: SweepSpec,
    run_store: Path,
    costs_from: Path | None = None,
    everything: bool = False,
    note: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> PlanView:
    """The plan of `spec`: checked before stopping (`run_store` must be writable), its
    costs from `costs_from` (read only; default `run_store` where it exists)."""
    check_before_stopping(spec, run_store)  # every mistake a spec can hold: exit 2
    path = costs_from or run_store
    if costs_from is not None and not path.is_file():
        note(f"note: --costs-from {path}: no sweep store there; the plan uses default costs")
    store = Store(path, create=False, read_only=True) if path.is_file() else None
    try:
        sweep = prepare(spec, store)
        head = sweep.estimate_text().splitlines()
        sections = [
            Section("", [Paragraph(line.strip()) for line in head[1:]] + _bench(sweep)),
            Section("How it runs", [Paragraph(line) for line in sweep.strategy.how_it_runs()]),
            Section("Limits", [Paragraph(line) for line in limit_lines(sweep)]),
            *predicted_sections(sweep, store, everything),
        ]
    finally:
        if store is not None:
            store.close()
    sections.append(trials_section(sweep, everything))
    checked = check_launches(
        sweep.run_spec.service, planned_launches(sweep.run_spec), run_store.parent.resolve()
    )
    lines = checked.lines()  # the summary, then what it refused and its notes
    sections.append(Section(lines[0], [Paragraph(line.strip()) for line in lines[1:]]))
    return PlanView(Document(head[0], sections), checked.ok)


def _bench(sweep: Sweep) -> list[Block]:
    return [Paragraph(bench_text(sweep.spec, sweep.costs).strip())]


def bench_text(spec: SweepSpec, costs: TrialCosts | None) -> str:
    """One bench's expected seconds per workload: the bench's expected (or measured) time
    split by each workload's share of the tokens it generates at most."""
    shares = bench_shares(spec.bench)
    tokens = sum(t for _, t in shares.values()) or 1
    parts = []
    for name, (requests, most) in shares.items():
        seconds = "" if costs is None else f", ~{costs.bench_s * most / tokens:.0f} s"
        parts.append(f"{share_text(spec.bench, name, requests)}{seconds}")
    return "  bench per trial: " + "; ".join(parts)


# --- Limits ---------------------------------------------------------------------------


def limit_lines(sweep: Sweep) -> list[str]:
    """Each cap of the spec and what it cuts; without an estimate, what it does."""
    spec, strategy, costs = sweep.spec, sweep.strategy, sweep.costs
    uncut = None if costs is None else strategy.span(costs, capped=False)
    cuts = []
    if spec.max_hours is not None:
        cuts.append((f"max_hours = {spec.max_hours:g}", _fits_hours(spec.max_hours)))
    if spec.max_trials is not None:
        cuts.append((f"max_trials = {spec.max_trials}", _fits_trials(spec.max_trials)))
    unknown = (
        "no costs known: set [service] expected_start_s and expected_bench_s"
        if costs is None
        else "no estimate of what the sweep needs without it"
    )
    lines = [
        f"[sweep] {cap}: nothing starts past it ({unknown})"
        if uncut is None
        else f"[sweep] {cap}: {_cut(uncut, fits)}"
        for cap, fits in cuts
    ]
    if strategy.races:
        lines += [
            f"[sweep] repeats = {spec.repeats}: at most {spec.repeats} passes; a race still "
            "open then stops undecided (the worst case above runs to it)",
            UNDECIDED,
        ]
    return lines or ["none: every trial it plans runs (no max_hours, max_trials or passes cap)"]


Fits = tuple[Callable[[Estimate], bool], Callable[[Estimate], str]]


def _fits_hours(cap: float) -> Fits:
    return (lambda e: e.hours <= cap), (lambda e: f"~{format_duration(e.seconds)}")


def _fits_trials(cap: int) -> Fits:
    return (lambda e: e.trials <= cap), (lambda e: f"{e.trials} trials")


def _cut(uncut: Span, fits: Fits) -> str:
    """What a cap cuts of the sweep `uncut` would be: 'the median race needs ~5.2 h (a
    typical landscape): cut there, more than half of races stop at it undecided (...)'."""
    ok, need = fits
    best, median, worst = uncut.best, uncut.median, uncut.worst
    if ok(worst):
        return f"never reached: even the worst case needs {need(worst)}"
    if median is not None and ok(median):
        return (
            f"the median race needs {need(median)} (a typical landscape), within it; a race "
            f"that runs long (the worst case needs {need(worst)}) stops at it undecided"
        )
    if median is not None and ok(best):
        return (
            f"the median race needs {need(median)} (a typical landscape): cut there, more "
            f"than half of races stop at it undecided (the best case needs {need(best)})"
        )
    if ok(best):
        return (
            f"a race that decides early fits (the best case needs {need(best)}); one that "
            f"runs to its worst case ({need(worst)}) stops at it undecided"
        )
    return f"even the best case needs {need(best)}: every race stops at it undecided"


# --- Predicted ------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigPrediction:
    """One config as `sweep plan` shows it: its predicted τ, its tok/s once a store of the
    same service measured trials, and the config that dominates it (never started)."""

    label: str
    tau: float | None
    tps: str | None  # "123.4 [100.0, 140.2]": the round-cost model's 95% interval
    dominated_by: str | None


@dataclass(frozen=True)
class PlanPredictions:
    source: str  # what the figures come from, in words
    configs: list[ConfigPrediction]  # the best predicted first
    note: str | None = None  # why the sweep races anyway (above T = 0)


def plan_predictions(
    spec: SweepSpec, forecast: Forecast, store: Store | None, start_sd: float
) -> PlanPredictions:
    """`sweep plan` of a spec with a trace: every config's predicted τ and, once a store of
    the same service has measured trials, its tok/s (a start moving it by `start_sd`), ranked;
    the dominated ones."""
    records: list[TrialRecord] = []
    if store is not None:
        records = [r for i in store.sweep_ids() for r in trial_records(store, i)]
    observations = store_observations(records, forecast)
    model = CostModel(forecast.shapes, observations, spec.seed, start_sd=start_sd)
    labels = [c.label() for c, _ in spec.all_configs()]
    source = f"predicted from the trace {spec.trace} (T = 0"
    source += (
        f"; tok/s from a round-cost model of {len(observations)} measured start-workload(s) "
        f"in {store.path}, a start moving a config by {start_sd:.0%})"
        if observations and store is not None
        else "; tok/s once trials are measured: ranked by tau, the acceptance length)"
    )

    def key(x: str) -> float:
        if observations:
            return -model.interval(x, spec.objective).point
        return -(forecast.acceptance.get(x) or 1.0)

    rows = [
        ConfigPrediction(
            label,
            forecast.acceptance.get(label),
            model.interval(label, spec.objective).text() if observations else None,
            next((a for a in labels if forecast.dominates(a, label)), None),
        )
        for label in sorted(labels, key=key)
    ]
    note = None
    if spec.bench.temperature != 0:
        note = "the bench is not at T = 0: a trace predicts T = 0 only, so the sweep races"
    return PlanPredictions(source, rows, note)


def predicted_sections(sweep: Sweep, store: Store | None, everything: bool) -> list[Section]:
    """With a trace: predict, then confirm beside the race, then the configs with their
    predictions; without one, the configs alone."""
    forecast = sweep.forecast
    if forecast is None:
        measured = sweep.mode.spread
        path = (
            outputs_path(sweep.spec, sweep.costs, measured) if sweep.strategy.from_outputs else None
        )
        configs = configs_section(sweep, None, None, everything)
        if path is None:
            return [configs]
        said = [*_outputs_blocks(sweep, path), *_reused_blocks(sweep)]
        return [Section("Predicted", said), configs]
    path = predicted_path(sweep.spec, forecast, sweep.costs, sweep.mode.spread)
    shown = plan_predictions(sweep.spec, forecast, store, sweep.start_sd(store))
    blocks: list[Block] = [Paragraph(shown.source)]
    blocks += [Paragraph(line) for line in path_lines(sweep, path)]
    blocks += _reused_blocks(sweep)
    return [Section("Predicted", blocks), configs_section(sweep, shown, path, everything)]


def _reused_blocks(sweep: Sweep) -> list[Block]:
    """The baseline's start this sweep takes from an earlier one, where the store holds one."""
    strategy = sweep.strategy
    if not isinstance(strategy, PredictingRace) or strategy.earlier is None:
        return []
    earlier = strategy.earlier
    since = time.time() if strategy.created is None else strategy.created
    return [
        Paragraph(
            f"the baseline is not started first: {earlier.words(since)} measured it as this "
            "sweep does, so the predicted winner starts first and the baseline once, later "
            "(where it wins, that start confirms it: one start fewer than above)"
        )
    ]


def _outputs_blocks(sweep: Sweep, path: PredictedPath) -> list[Block]:
    """No trace: what the baseline's first bench will predict, and the path it opens."""
    word = restart_word(sweep.spec)
    starts = f"{len(path.starts)} {word}"
    cost = starts if path.estimate is None else f"~{starts}, ~{_hours(path.estimate)}"
    return [
        Paragraph(
            f"predicted without a trace: {outputs_words(sweep.spec)}; what a round costs from "
            "the forwards the baseline's first bench times on the running server"
        ),
        Paragraph(
            f"predict, then confirm: {cost} if the predictions hold (a close call or a miss: a "
            f"start or two more); without them, {_span_words(sweep)}"
        ),
        Paragraph(f"starts, in order: {', '.join(label for label, _ in path.starts)}"),
    ]


def path_lines(sweep: Sweep, path: PredictedPath | None) -> list[str]:
    """Predict, then confirm against the race (or the line that would take that path)."""
    spec = sweep.spec
    if path is None:
        return [f"no prediction path: {unpredictable(spec, sweep.forecast)}"]
    word = restart_word(spec)
    starts = f"{len(path.starts)} {word}"
    cost = starts if path.estimate is None else f"~{starts}, ~{_hours(path.estimate)}"
    race = _span_words(sweep)
    if sweep.strategy.forecast is not None:  # this sweep predicts
        return [
            f"predict, then confirm: {cost} if the predictions hold (each miss: a start or "
            f"two more); without them, {race}",
            f"starts, in order: {', '.join(label for label, _ in path.starts)}; never: "
            f"{len(path.never)} dominated config(s); the rest only if they could still win",
        ]
    unpin = " (and no restart_bound)" if spec.restart_bound.setting != "auto" else ""
    return [
        f'with strategy = "predict" in [sweep]{unpin}, this trace would take {cost} if its '
        f"predictions hold, against {race}"
    ]


def _span_words(sweep: Sweep) -> str:
    """'the restart-bound race: ~15 restarts, ~2 min (median), ~30 min at worst'."""
    costs, strategy = sweep.costs, sweep.strategy
    span = None if costs is None else strategy.span(costs)
    name = "this search" if strategy.searches else f"this {sweep.spec.strategy}"
    name = "the restart-bound race" if sweep.mode.restart_bound else name
    if costs is None:
        return f"{name} (no costs: set [service] expected_start_s and expected_bench_s)"
    if span is None:
        return f"{name} (no estimate of its length)"
    word = restart_word(sweep.spec)
    if span.median is not None and span.median != span.worst:
        median = span.median
        return (
            f"{name}: ~{median.restarts} {word}, ~{_hours(median)} (median), "
            f"~{_hours(span.worst)} at worst"
        )
    if span.best == span.worst:
        return f"{name}: {span.best.restarts} {word}, ~{_hours(span.best)}"
    return (
        f"{name}: {span.best.restarts}-{span.worst.restarts} {word}, "
        f"~{_hours(span.best)} to ~{_hours(span.worst)}"
    )


def _hours(e: Estimate) -> str:
    return format_duration(e.seconds)


# --- Configs and trials -----------------------------------------------------------------


def configs_section(
    sweep: Sweep,
    shown: PlanPredictions | None,
    path: PredictedPath | None,
    everything: bool,
) -> Section:
    """One row a config: the trials planned now, with a trace its prediction and what
    predict, then confirm does with it; the best predicted first."""
    labels = _labels(sweep, shown)
    columns = _columns(sweep, shown, path)
    rows: list[list[Cell]] = [
        [str(i), *(cell(x) for _, cell in columns)] for i, x in enumerate(labels, 1)
    ]
    blocks: list[Block] = [
        Table(["#", *(header for header, _ in columns)], rows if everything else rows[:SHOWN])
    ]
    if not everything and len(rows) > SHOWN:
        blocks.append(Paragraph(f"... and {len(rows) - SHOWN} more config(s) (--all lists them)"))
    return Section(f"Configs: {len(rows)}", blocks)


Column = tuple[str, Callable[[str], str]]


def _columns(
    sweep: Sweep, shown: PlanPredictions | None, path: PredictedPath | None
) -> list[Column]:
    """The config; its trials planned now (none for a race planned start by start); with
    a trace its predicted acceptance, tok/s (once measured) and its part in the path."""
    base = sweep.spec.baseline
    baseline = None if base is None else base.label()
    columns: list[Column] = [("config", lambda x: x + (" (baseline)" if x == baseline else ""))]
    if sweep.plan:
        columns.append(
            ("trials now", lambda x: str(sum(t.config.label() == x for t in sweep.plan)))
        )
    if shown is None:
        return columns
    by = {p.label: p for p in shown.configs}
    columns.append(("acceptance (tau)", lambda x: _number(by[x].tau)))
    if any(p.tps for p in shown.configs):
        columns.append(("tok/s predicted", lambda x: by[x].tps or "-"))
    if path is not None:
        columns.append(("predict, then confirm", lambda x: _role(x, path)))
    return columns


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _labels(sweep: Sweep, shown: PlanPredictions | None) -> list[str]:
    if shown is not None:
        return [p.label for p in shown.configs]
    return [config.label() for config, _ in sweep.spec.all_configs()]


def _role(label: str, path: PredictedPath) -> str:
    order = [x for x, _ in path.starts]
    if label in order:
        return f"start {order.index(label) + 1}: {dict(path.starts)[label]}"
    if label in path.never:
        return f"never starts: dominated by {path.never[label]}"
    return "starts only if it could still win"


def trials_section(sweep: Sweep, everything: bool) -> Section:
    """The trials planned now, in order (the first `SHOWN_TRIALS` unless `everything`)."""
    spec, trials = sweep.run_spec, sweep.plan
    restarts = sum(1 for t in trials if (t.repeat - 1) % spec.passes_per_start == 0)
    title = f"planned now: {len(trials)} trial(s), {restarts} {restart_word(spec)}"
    lines = [
        f"{t.order_index + 1:4d}  pass {t.repeat:<3d} {t.config.label()}"
        + (" (baseline)" if t.is_baseline else "")
        for t in trials
    ]
    blocks: list[Block] = [Bullets(lines if everything else lines[:SHOWN_TRIALS])] if lines else []
    if not everything and len(lines) > SHOWN_TRIALS:
        more = len(lines) - SHOWN_TRIALS
        blocks.append(Paragraph(f"... and {more} more trial(s) (--all lists them)"))
    return Section(title + sweep.strategy.later, blocks)


# --- the terminal -----------------------------------------------------------------------


def plan_text(document: Document, console: Console) -> str:
    """The document as `console` would print it (styles on a terminal only): each
    section's title, then its blocks indented. Returned, not printed: the caller's
    `print` meets a reader that went away (`| head`) as every command does."""
    with console.capture() as captured:
        _print(document, console)
    return "".join(line.rstrip() + "\n" for line in captured.get().splitlines())


def _print(document: Document, console: Console) -> None:
    _say(console, Text(document.title))
    for section in document.sections:
        if section.title:
            _say(console, Text("\n" + section.title, style="bold"))
        for block in section.blocks:
            _say(console, _rich(block))


def _say(console: Console, renderable: RenderableType) -> None:
    console.print(renderable, soft_wrap=True, highlight=False)


def _rich(block: Block) -> RenderableType:
    """A paragraph or lines indented by two spaces, never folded (a pipe keeps each line
    whole); a table padded as much."""
    if isinstance(block, Paragraph):
        return Text("  " + block.text, style="yellow" if block.warning else "")
    if isinstance(block, Bullets):
        return Text("\n".join("  " + item for item in block.items))
    if isinstance(block, Table):
        rows = [[str(c) for c in row] for row in block.rows]
        return Padding(_table(block.headers, rows), (0, 0, 0, 2), expand=False)
    raise TypeError(f"sweep plan shows no {type(block).__name__}")


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> RichTable:
    table = RichTable(box=None, pad_edge=False, header_style="bold")
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    return table


__all__ = ["SHOWN", "SHOWN_TRIALS", "PlanView", "plan_text", "plan_view"]
