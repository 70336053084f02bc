"""The report hand-off: a sweep's records, options and race history to `ddtune.report`.

The report options come from the spec kept with the sweep (`[report]` and
what the strategy implies: tolerance, blocked analysis, passes per start,
interleave; a restart-bound race's benches per start, from the mode stored
with the sweep); a race's history is replayed from the store, so a report of
an unfinished or interrupted sweep tells the same story the runner would.

`LiveReport` is the runner's `on_pass`: `ddtune sweep run|retry` and `ddtune
demo` rewrite `<store folder>/report/` after every pass (each file atomically),
which `ddtune sweep watch` serves next to the live page (`sweep/watch/`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from ddtune.records import SweepContext, TrialRecord
from ddtune.report.options import ReportOptions
from ddtune.sweep.plan import parse_spec
from ddtune.sweep.plan.prepare import Sweep, prepare
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.rows import SweepRow

if TYPE_CHECKING:
    from ddtune.report.result import ReportSummary


def stored_spec(store: Store, sweep: SweepRow) -> SweepSpec:
    """The spec kept with the sweep, its relative paths against the folder it came from."""
    base_dir = Path(sweep["spec_dir"]) if sweep["spec_dir"] else None
    source = f"{store.path} (spec of sweep {sweep['name']!r})"
    return parse_spec(sweep["spec_text"], source=source, base_dir=base_dir)


def stored_sweep(store: Store, sweep: SweepRow) -> Sweep:
    """The sweep as its stored spec and mode say, prepared (once per command)."""
    return prepare(stored_spec(store, sweep), store, sweep["id"])


def report_setup(
    store: Store,
    sweep: SweepRow,
    overrides: dict[str, Any] | None = None,
    prepared: Sweep | None = None,
) -> tuple[ReportOptions, SweepContext]:
    """Report options and race history from the spec kept with the sweep (`prepared`
    from it when the caller has not); the spec's `[report]` table (e.g. `load_weights`)
    and then `overrides` win over the derived ones."""
    if prepared is None:
        prepared = stored_sweep(store, sweep)
    spec = prepared.run_spec  # restart-bound: one start serves up to `most_benches` trials
    derived = {
        "tolerance": spec.tolerance,
        "blocked": prepared.strategy.blocked(sweep),
        "passes_per_start": spec.passes_per_start,
        "interleave": spec.interleave,
    }
    options = ReportOptions.from_dict({**derived, **spec.report, **(overrides or {})})
    context = prepared.context(store, sweep)
    context.store = str(store.path)
    return options, context


def answer_text(summary: ReportSummary) -> str:
    """The report's answer for the terminal: one line per objective, then the command."""
    from ddtune.report.headline import headline

    answer = headline(summary)
    lines = [f"{line.title}: {line.text} — {line.status}" for line in answer.lines]
    if summary.workloads is not None:
        lines.append(summary.workloads.finding)
    if answer.command is not None:
        lines += [answer.command_caption, f"  {answer.command}"]
    return "\n".join(["", "answer:", *lines])


def live_report(store_path: Path, sweep_name: str, console: Console) -> LiveReport:
    """The live report of a run: `<store folder>/report/`, announced once."""
    out_dir = store_path.parent / "report"
    console.print(
        f"live report: {out_dir / 'report.html'} (rewritten after every pass; watch it with "
        f"ddtune sweep watch --store {store_path})",
        markup=False,
        highlight=False,
    )
    return LiveReport(out_dir, sweep_name, console)


def write_report(
    store: Store,
    sweep: SweepRow,
    out_dir: Path,
    console: Console,
    overrides: dict[str, Any] | None = None,
    prepared: Sweep | None = None,
) -> ReportSummary:
    """Hand the store's TrialRecords to `ddtune.report.build_report`; say where it wrote."""
    result, trials = build_stored_report(store, sweep, out_dir, overrides, prepared)
    print_report(result, sweep["name"], trials, out_dir, console)
    return result


def build_stored_report(
    store: Store,
    sweep: SweepRow,
    out_dir: Path,
    overrides: dict[str, Any] | None = None,
    prepared: Sweep | None = None,
) -> tuple[ReportSummary, int]:
    """The sweep's report written to `out_dir`, and how many trials it holds."""
    from ddtune.report import build_report

    records = store.trial_records(sweep["id"])
    out_dir.mkdir(parents=True, exist_ok=True)
    options, context = report_setup(store, sweep, overrides, prepared)
    return build_report(records, out_dir, options, context), len(records)


def analyze_stored(
    store: Store,
    sweep: SweepRow,
    records: list[TrialRecord] | None = None,
    prepared: Sweep | None = None,
) -> ReportSummary:
    """The report's analysis of the sweep (of `records` when already read), nothing written."""
    from ddtune.report import analyze

    options, context = report_setup(store, sweep, prepared=prepared)
    if records is None:
        records = store.trial_records(sweep["id"])
    return analyze(records, options, context)


def print_report(
    result: ReportSummary, sweep_name: str, trials: int, out_dir: Path, console: Console
) -> None:
    """The table, the files of a report written to `out_dir`, then the answer (the headline
    and the apply command: the last thing the terminal shows, as the report begins with it)."""
    console.print(result.terminal_table(), markup=False, highlight=False)
    files = sorted(p.name for p in out_dir.iterdir() if not p.name.startswith("."))
    console.print(
        f"report for sweep {sweep_name} ({trials} trials) in {out_dir}: {', '.join(files)}"
    )
    console.print(answer_text(result), markup=False, highlight=False)


def report_failed(out_dir: Path, exc: Exception, console: Console) -> str:
    """A live report that could not be rewritten: said in red, and its folder holds a notice
    in place of the last report (an old answer is never left beside newer trials)."""
    from ddtune.report.render.atomic import replace_with_notice

    why = f"{type(exc).__name__}: {exc}"
    console.print(f"[red]live report not rewritten[/]: {escape(why)}")
    lines = [
        f"The report could not be rewritten after the last pass: {why}.",
        "The previous report was removed so that its answer is not read as the current one.",
        "Run `ddtune sweep report` on the store to see the error in full.",
    ]
    try:
        replace_with_notice(out_dir, "No current report", lines)
    except OSError as error:
        console.print(f"[red]and the notice could not be written either[/]: {escape(str(error))}")
    return why


class LiveReport:
    """`run_sweep(..., on_pass=LiveReport(out_dir, name, console))`: the report folder
    rewritten after every pass and at the end of the run (`final`).

    Rebuilding never takes more than `MAX_SHARE` of the sweep's time: a pass that ends
    sooner after the last rewrite than 1/MAX_SHARE - 1 times that rewrite's duration
    waits for the next pass (or the end). A report that fails is said in red, its folder
    then holds a notice in place of the old report (`report_failed`), the run's summary
    line says so, and the sweep goes on."""

    MAX_SHARE = 0.1

    def __init__(self, out_dir: Path, sweep_name: str, console: Console) -> None:
        self.out_dir, self.sweep_name, self.console = out_dir, sweep_name, console
        self.seconds: list[float] = []  # how long each rewrite took
        self.skipped = 0  # passes folded into a later rewrite (too soon after the last)
        self.dirty = False  # a pass finished since the last rewrite
        self.last: tuple[ReportSummary, int] | None = None  # the last rewrite's (report, trials)
        self.prepared: Sweep | None = None  # the run's prepared sweep (its first call)
        self._last_end: float | None = None
        self.failures: list[str] = []  # why each failed rewrite failed (`report_failed`)

    def __call__(self, store: Store, prepared: Sweep, final: bool = False) -> None:
        """A pass ended (or, `final`, the run): the report rewritten from the run's sweep."""
        self.prepared = prepared
        self.dirty = self.dirty or not final
        if not self.dirty and self.seconds:
            return  # nothing new since the last rewrite
        if not final and self._too_soon():
            self.skipped += 1
            return
        started = time.monotonic()
        if self._rewrite(store):
            self.seconds.append(time.monotonic() - started)
        self._last_end, self.dirty = time.monotonic(), False

    def _too_soon(self) -> bool:
        if self._last_end is None or not self.seconds:
            return False
        quiet = self.seconds[-1] * (1 / self.MAX_SHARE - 1)
        return time.monotonic() - self._last_end < quiet

    def _rewrite(self, store: Store) -> bool:
        self.last = None
        try:
            row = store.sweep_row(self.sweep_name)
            self.last = build_stored_report(
                store, row, self.out_dir, None, self._prepared(store, row)
            )
        except Exception as exc:  # noqa: BLE001 - a report must never stop the sweep
            self.failures.append(report_failed(self.out_dir, exc, self.console))
            return False
        return True

    def final(self, store: Store) -> ReportSummary:
        """The report at the end of a run, printed: the last rewrite when nothing finished
        since, else written now (`write_report`, which raises what a rewrite only warned of)."""
        if self.last is not None and not self.dirty:
            result, trials = self.last
            print_report(result, self.sweep_name, trials, self.out_dir, self.console)
            return result
        row = store.sweep_row(self.sweep_name)
        prepared = self._prepared(store, row)
        return write_report(store, row, self.out_dir, self.console, None, prepared)

    def _prepared(self, store: Store, row: SweepRow) -> Sweep:
        """The run's sweep; prepared from the store only where no pass ran."""
        if self.prepared is None:
            self.prepared = stored_sweep(store, row)
        return self.prepared

    def summary_line(self) -> str:
        """'live report: 12 rewrites of runs/x/report, median 0.84 s, longest 1.20 s'."""
        if self.failures:
            return (
                f"live report: FAILED {len(self.failures)} time(s), last: {self.failures[-1]}; "
                f"{self.out_dir} holds a notice, not an answer"
            )
        if not self.seconds:
            return f"live report: not written ({self.out_dir})"
        ordered = sorted(self.seconds)
        folded = f"; {self.skipped} pass(es) folded into a later one" if self.skipped else ""
        return (
            f"live report: {len(ordered)} rewrite(s) of {self.out_dir}, median "
            f"{ordered[len(ordered) // 2]:.2f} s, longest {ordered[-1]:.2f} s{folded}"
        )
