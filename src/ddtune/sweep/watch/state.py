"""What `ddtune sweep watch` shows, read from the store without writing to it.

    state = read_state(Path("runs/x/store.sqlite"), sweep=None)   # the newest sweep
    state.phase        # "running" | "finished" | "interrupted"
    state.configs      # one ConfigState per config: racing / left at pass N / done ...
    state.now          # the trials running now (with the slot and phase on Ray)
    state.failures     # failed and interrupted attempts, each with its log tail
    state.eta          # "about 40 s for the 4 trials planned now; ..."
    state.summary      # the report's analysis so far (`ddtune.report.analyze`)

The store is opened read-only (`Store(path, read_only=True)`): no lock, no
recovery, so it works while a runner holds the store, after it ended, and
after it was killed (its trials still say `running`; the lock says nobody
runs them). See docs/watch.md.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, Any

from ddtune.records import TrialRecord
from ddtune.report.sections import STOP_WORDS
from ddtune.services.outcome import tail_lines
from ddtune.sweep.plan.costs import format_duration, trial_costs
from ddtune.sweep.plan.prepare import Sweep
from ddtune.sweep.reporting import analyze_stored, stored_sweep
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.files import failed_attempts
from ddtune.sweep.store.rows import SweepRow
from ddtune.sweep.store.slot_tables import slot_rows

if TYPE_CHECKING:
    from ddtune.report.result import ReportSummary

TAIL_LINES = 15  # of each failed attempt's log
UNFINISHED = ("pending", "running", "interrupted")


@dataclass
class ConfigState:
    label: str
    is_baseline: bool
    trials: int  # planned so far
    done: int
    failed: int
    state: str  # "racing", "left at pass 3 (slower)", "running now", "done", "waiting"


@dataclass
class TrialNow:
    trial_id: int
    label: str
    repeat: int
    attempt: int
    started_at: float  # epoch seconds
    slot: str = ""  # ray backend: the slot and what it is doing
    phase: str = ""


@dataclass
class FailedAttempt:
    trial_id: int
    label: str
    repeat: int
    attempt: int
    state: str  # "failed" | "interrupted"
    failure: str
    detail: str
    log: str | None  # path of its log tail
    tail: str  # its last lines


@dataclass
class LiveState:
    sweep: str
    store: Path
    strategy: str
    phase: str  # "running" | "finished" | "interrupted"
    phase_text: str  # the phase in a sentence, with what to do next
    counts: dict[str, int]  # trial status -> trials
    passes: int  # finished passes (a race's blocks)
    configs: list[ConfigState]
    now: list[TrialNow]
    failures: list[FailedAttempt]
    slots: list[dict[str, Any]]
    eta: str
    summary: ReportSummary | None
    analysis_error: str | None = None
    read_at: float = field(default_factory=time.time)


def read_state(
    store_path: Path, sweep: str | None = None, prepared: dict[Any, Sweep] | None = None
) -> LiveState:
    """What the page shows now; `prepared` keeps each sweep prepared once (by its id and
    spec) across the refreshes of one `sweep watch`."""
    store = Store(store_path, read_only=True)
    try:
        row = store.sweep_row(sweep)
        key = (row["id"], row["spec_hash"])
        cache = {} if prepared is None else prepared
        if key not in cache:
            cache[key] = stored_sweep(store, row)
        return _read(store, row, cache[key])
    finally:
        store.close()


def _read(store: Store, sweep: SweepRow, prepared: Sweep) -> LiveState:
    records = store.trial_records(sweep["id"])
    runner = store.runner_pid()
    summary, error = _analysis(store, sweep, records, prepared)
    context = None if summary is None else summary.context
    passes = 0 if context is None else context.passes
    counts = {s: sum(r.status == s for r in records) for s in ("done", "failed", *UNFINISHED)}
    phase, text = _phase(counts, runner, store.path, context)
    slots = _slots(store, sweep["id"])
    return LiveState(
        sweep=sweep["name"],
        store=store.path,
        strategy=prepared.spec.strategy,
        phase=phase,
        phase_text=text,
        counts=counts,
        passes=passes,
        configs=_configs(records, summary, runner is not None),
        now=_running(store, sweep["id"], slots) if runner is not None else [],
        failures=_failures(store, records),
        slots=slots,
        eta=_eta(store, sweep["id"], prepared, counts, summary) if runner is not None else "",
        summary=summary,
        analysis_error=error,
    )


def _analysis(
    store: Store, sweep: SweepRow, records: list[TrialRecord], prepared: Sweep
) -> tuple[ReportSummary | None, str | None]:
    """The report's analysis of the records so far; (None, why) when it cannot be made."""
    if not any(r.status == "done" for r in records):
        return None, "no trial has finished yet"
    try:
        return analyze_stored(store, sweep, records, prepared), None
    except Exception as exc:  # noqa: BLE001 - the page shows what went wrong and lives on
        return None, f"{type(exc).__name__}: {exc}"


def _phase(
    counts: dict[str, int], runner: int | None, store: Path, context: Any
) -> tuple[str, str]:
    resume = f"resume with: ddtune sweep retry --store {store}"
    if runner is not None:
        return "running", f"running (runner pid {runner})"
    unfinished = sum(counts[s] for s in UNFINISHED)
    if unfinished:
        return "interrupted", f"interrupted: {unfinished} trial(s) unfinished, no runner; {resume}"
    if context is not None and context.race and context.stop is None:
        return "interrupted", f"interrupted between passes: the race has not stopped; {resume}"
    stop = None if context is None else context.stop
    return "finished", "finished" + (f": {STOP_WORDS.get(stop, stop)}" if stop else "")


def _configs(
    records: list[TrialRecord], summary: ReportSummary | None, live: bool
) -> list[ConfigState]:
    by_label: dict[str, list[TrialRecord]] = {}
    for r in records:
        by_label.setdefault(r.label, []).append(r)
    states = []
    for label, group in by_label.items():
        statuses = [r.status for r in group]
        states.append(
            ConfigState(
                label=label,
                is_baseline=any(r.is_baseline for r in group),
                trials=len(group),
                done=statuses.count("done"),
                failed=statuses.count("failed"),
                state=_config_word(label, statuses, summary, live)
                + (" (the baseline: in every pass)" if group[0].is_baseline else ""),
            )
        )
    return states


def _config_word(label: str, statuses: list[str], summary: ReportSummary | None, live: bool) -> str:
    """racing / running now / left at pass N (why) / waiting / unfinished / done."""
    exit_ = None if summary is None else summary.context.exit_of(label)
    if live and "running" in statuses:
        return "running now"
    if exit_ is not None:
        return f"left at pass {exit_.at_pass} ({exit_.reason})"
    if any(s in UNFINISHED for s in statuses):
        return "waiting" if live else "unfinished"
    racing = summary is not None and summary.context.race
    return "racing" if racing and summary is not None and summary.context.stop is None else "done"


def _running(store: Store, sweep_id: int, slots: list[dict[str, Any]]) -> list[TrialNow]:
    """The attempts running now, each with the slot that runs it (Ray)."""
    by_trial = {s["trial_id"]: s for s in slots if s["trial_id"]}
    now = []
    for r in store.running_attempts(sweep_id):
        slot = by_trial.get(r.trial_id, {})
        now.append(
            TrialNow(
                r.trial_id,
                r.label,
                r.repeat,
                r.number,
                r.started_at,
                slot.get("name", ""),
                slot.get("phase") or "",
            )
        )
    return now


def _failures(store: Store, records: list[TrialRecord]) -> list[FailedAttempt]:
    started = (r for r in records if r.attempts >= 1 and r.status != "pending")
    return [
        FailedAttempt(
            record.trial_id,
            record.label,
            record.repeat,
            attempt["number"],
            attempt["state"],
            attempt["failure"] or "",
            attempt["detail"] or "",
            log,
            _tail(log),
        )
        for record, attempt, log in failed_attempts(store, started)
    ]


def _tail(path: str | None, lines: int = TAIL_LINES) -> str:
    if not path:
        return ""
    log = Path(path)
    try:
        log.stat()  # a stored path whose file is gone says so (tail_lines would say "")
        return tail_lines(log, lines)  # the last 512 KiB only
    except OSError as exc:
        return f"(log not readable: {exc.strerror})"


def _slots(store: Store, sweep_id: int) -> list[dict[str, Any]]:
    """The ray backend's slots ([] for a local sweep or a store older than the slot table)."""
    return slot_rows(store, sweep_id)


def _eta(
    store: Store,
    sweep_id: int,
    prepared: Sweep,
    counts: dict[str, int],
    summary: ReportSummary | None,
) -> str:
    """'about 40 s for the 4 trial(s) planned now; a race may add up to ...'."""
    if text := restart_bound_eta(store, sweep_id, prepared):
        return text
    spec = prepared.spec
    seconds = list(store.trial_seconds(sweep_id).values())
    expected = trial_costs(spec, None)  # the spec's expected seconds, before any finished
    per_trial: float | None = median(seconds) if seconds else None
    if per_trial is None and expected is not None:
        per_trial = expected.start_s + expected.bench_s
    left = sum(counts[s] for s in UNFINISHED)
    if per_trial is None:
        return f"{left} trial(s) planned now (no trial has finished: no time per trial yet)"
    text = (
        f"about {format_duration(per_trial * left)} for the {left} trial(s) planned now"
        if left
        else "the next pass is being planned"
    )
    text += prepared.strategy.eta_more(summary, per_trial, left, sum(counts.values()))
    return text + f" ({format_duration(per_trial)} per trial)"


def restart_bound_eta(store: Store, sweep_id: int, prepared: Sweep) -> str | None:
    """A restart-bound race's time left (None for any other sweep).

    Its trials are single benches, some on a fresh start and most on a start
    already serving, and it plans one at a time: a median time per trial says
    little. Instead: the costs measured in this store (a start, a bench), and
    the race's expected and worst-case length (`sweep plan`'s) less the time
    spent so far.
    """
    if not prepared.mode.restart_bound:
        return None
    spent = sum(store.trial_seconds(sweep_id).values())
    head = f"restart-bound race, one start planned at a time; {format_duration(spent)} spent"
    costs = trial_costs(prepared.spec, store)  # measured so far
    if costs is None:
        return head + " (no start or bench measured yet: no estimate)"
    named = prepared.strategy.estimates(costs)
    expected = named["restart-bound race, expected (median)"].seconds
    worst = named["restart-bound race, worst case"].seconds
    left = (
        f"about {format_duration(expected - spent)} left if it decides as races usually do"
        if spent < expected
        else "longer than a usual race already"
    )
    return (
        f"{head}; {left}, at most {format_duration(max(worst - spent, 0))} "
        f"({costs.start_s:.0f} s a start, {costs.bench_s:.0f} s a bench)"
    )
