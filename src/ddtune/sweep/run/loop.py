"""The sweep runner: plan → for each unfinished trial: reconfigure → READY → bench → store.

    0. The engine check (`engine_check.py`): the engine's own parser accepts every planned
       config's launch command, else `EngineRefused` (exit 2) before the store is
       opened or the service touched;
    1. Take the store's runner lock; trials a dead runner left `running` become
       `interrupted`; create the sweep and its trials on the first run.
    2. For each trial that is pending or interrupted (done and failed ones are
       kept as they are; `sweep retry` reopens failed ones), then for each trial a
       race or search adds (`planner.next_batch()`: the next pass, the next
       proposal) until it stops:
       a. attempt n: `controller.reconfigure(params, attempt_dir, user_vars=...,
          on_phase=...)` runs the readiness protocol (stop, quiesce, start, wait
          for the new identity); each phase it announces shows in the progress line;
       b. READY → `run_bench(...)` → samples + results + `done`, one transaction;
       c. not READY (or the bench failed) → the attempt is stored with its
          failure class, detail, timings and log tail, and retried after a backoff;
       d. all attempts failed → the trial is `failed`; the sweep goes on;
       e. `passes_per_start` > 1: the next trial of the same config and block
          benches the same server start (no reconfigure); a restart-bound race
          (the mode stored with the sweep, `plan/strategies/restart_bound.py`)
          plans one trial at a time and reuses a start the same way
          (`plan/start_planner.py`);
       f. `interleave = "request"`: a pass's trials run as one unit
          (`interleaved.py`: each READY in turn, then their requests in turns).
       g. a pass's last trial finished: `on_pass(store, False)` (the CLI's live report,
          the report folder rewritten: `sweep/reporting.py` `LiveReport`).
    3. Ctrl-C / SIGTERM: the current trial (or pass) becomes `interrupted`, the service is
       restored as it was before the sweep (`restore.py`), and the exit code is 3 with a
       resume hint; a sweep that ends is restored too (unless `restore_at_end=False`).
       The breaker (`breaker.py`): the same failure class on `[sweep] breaker` configs in
       a row starts the baseline as a control; failing too, it stops the sweep (exit 1).
       An attempt that fails because a process ddtune never stops holds the port
       (`Outcome.port_holders`) stops the sweep the same way, exit code 4.

Exit codes (`RunSummary.exit_code`; `ddtune sweep run|retry` and `ddtune demo`):
0 every trial asked for is done and none of the sweep is failed; 1 some trials
failed (now, or earlier and not retried); 2 bad input (spec, arguments, store;
printed by the CLI) or a launch command the engine refused (step 0); 3
interrupted; 4 blocked by a process on the port.

Every failure line says class + detail + log path; nothing is a bare "skip".
See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from ddtune.stats.blocked import block_of
from ddtune.sweep.plan.planners import Planner, live_eta
from ddtune.sweep.plan.prepare import prepare
from ddtune.sweep.run.attempt import (
    AttemptReport,
    Phase,
    become_ready,
    execute_attempt,
    note_ready,
    store_report,
)
from ddtune.sweep.run.breaker import Breaker, ServiceBroken, failed_outcome, stopped_line
from ddtune.sweep.run.common import (
    RESUMABLE,
    RunSummary,
    SweepBlocked,
    blocked_by,
    hardware_now,
    signals_ignored,
    signals_raise,
)
from ddtune.sweep.run.engine_check import EngineCheckReport, check_engine
from ddtune.sweep.run.prestop import check_before_stopping
from ddtune.sweep.run.restore import restore, seen_before
from ddtune.sweep.spec.parse import Config, SweepSpec
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.files import attempt_dir
from ddtune.sweep.store.rows import TrialRow

if TYPE_CHECKING:
    from ddtune.services import Controller, Outcome
    from ddtune.sweep.run.ray.driver import SlotLoop


def run_sweep(
    spec: SweepSpec,
    store_path: Path,
    console: Console | None = None,
    resume_hint: str | None = None,
    reopen_failed: bool = False,
    only_reopened: bool = False,
    on_pass: Callable[[Store, bool], None] | None = None,
    checked: EngineCheckReport | None = None,
    restore_at_end: bool = True,
) -> RunSummary:
    """Run (or resume) the sweep; see the module docstring for the steps. `on_pass(store,
    final)` runs after every finished pass and at the end (the live report,
    `sweep/reporting.py`). `checked`: the engine check the caller already ran (step 0).
    `restore_at_end=False` (`sweep run --apply`): a sweep that ends leaves the service
    stopped for the apply; interrupted or stopped ones are restored all the same."""
    console = console or Console(stderr=True)
    started = time.monotonic()
    check_before_stopping(spec, store_path)  # 0: files, store, windows (prestop.py)
    if checked is None:
        checked = check_engine(spec, store_path.parent.resolve())  # 0
    if checked.engine is not None or not spec.service.engine_check:
        console.print(escape("\n".join(checked.lines())))
    store = Store(store_path)
    try:
        store.acquire()  # 1
        store.recover_if_unlocked()
        sweep = prepare(spec, store)  # a new sweep's mode is stored with it; then it stays
        spec, mode = sweep.run_spec, sweep.mode
        plan = list(sweep.plan)
        sweep_id = store.open_sweep(spec.name, spec.text, spec.hash, plan, spec.base_dir, mode)
        todo, summary = _open_trials(
            store, sweep_id, store_path, console, reopen_failed, only_reopened
        )
        summary.on_pass = on_pass
        planner = None if only_reopened else sweep.planner(store, store_path, sweep_id)
        console.print(escape(sweep.estimate_text()))
        if todo or planner is not None:
            loop = trial_loop(spec, store, store_path.parent.resolve(), console, summary)
            if isinstance(loop, TrialLoop):
                loop.restore_at_end = restore_at_end
            loop.run(todo, None if planner is None else planner.next_batch)  # 2, 3
        summary.planned = len(store.trials(sweep_id))  # a race or search added trials
        if not summary.interrupted:
            summary.report(store, final=True)  # the trials of an unfinished pass, too
        hint = resume_hint or f"ddtune sweep run {spec.source} --store {store_path}"
        _say_how_it_ended(console, summary, planner, hint)
        summary.seconds = time.monotonic() - started
        return summary
    finally:
        store.close()


def _open_trials(
    store: Store,
    sweep_id: int,
    store_path: Path,
    console: Console,
    reopen_failed: bool,
    only_reopened: bool,
) -> tuple[list[TrialRow], RunSummary]:
    """The trials to run now (pending, interrupted, reopened failed ones) and a fresh summary."""
    reopened = store.reset_trials(sweep_id, ("failed",)) if reopen_failed else []
    if reopen_failed:
        console.print(f"reopened {len(reopened)} failed trial(s)")
    todo = [
        t for t in store.trials(sweep_id, RESUMABLE) if not only_reopened or t["id"] in reopened
    ]
    summary = RunSummary(
        sweep_id,
        store_path,
        len(store.trials(sweep_id)),
        len(store.trials(sweep_id, ("done",))),
        failed_before=len(store.trials(sweep_id, ("failed",))),
    )
    return todo, summary


def _say_how_it_ended(
    console: Console, summary: RunSummary, planner: Planner | None, hint: str
) -> None:
    """The planner's outcome when it ran to the end; the resume command when it did not;
    then how the service was left (`restore.py`)."""
    stopped = summary.interrupted or summary.blocked or summary.broken
    if planner is not None and not stopped:
        console.print(escape(planner.outcome()))
    if summary.interrupted:
        console.print(f"[yellow]interrupted[/]; resume with: {escape(hint)}")
    if summary.blocked:
        console.print(
            f"[red]stopped[/]: {escape(summary.blocked)}\nthen resume with: {escape(hint)}"
        )
    if summary.broken:
        console.print(f"[red]stopped[/]: {escape(summary.broken)}: {escape(hint)}")
    if summary.restored:
        console.print(escape(summary.restored))


def trial_loop(
    spec: SweepSpec, store: Store, workdir: Path, console: Console, summary: RunSummary
) -> TrialLoop | SlotLoop:
    """The loop of `spec.cluster.backend`: this process (local) or a pool of Ray slots."""
    if spec.cluster.backend == "ray":
        from ddtune.sweep.run.ray.driver import SlotLoop

        return SlotLoop(spec, store, workdir, console, summary)
    return TrialLoop(spec, store, workdir, console, summary)


class TrialLoop:
    """Runs a list of trials against one controller, with progress and signals."""

    def __init__(
        self, spec: SweepSpec, store: Store, workdir: Path, console: Console, summary: RunSummary
    ) -> None:
        self.spec, self.store, self.workdir = spec, store, workdir
        self.console, self.summary = console, summary
        self.hardware = hardware_now()
        self._serving: tuple[tuple[str, int], Outcome] | None = None  # passes_per_start reuse
        self.breaker = Breaker(spec.breaker)
        self.restore_at_end = True  # False (`sweep run --apply`): an ended sweep stays stopped

    def run(self, todo: list[TrialRow], more: Callable[[], list[TrialRow]] | None = None) -> None:
        """The trials of `todo`, then each batch `more()` returns, until it returns []."""
        from ddtune.services import Owner, build_controller

        owner = Owner.current(sweep=self.spec.name, store=str(self.store.path.resolve()))
        controller = build_controller(self.spec.service, self.workdir, owner=owner)
        self.summary.before = seen_before(controller)
        current: list[int] = []  # the trials in flight: one, or a request-interleaved pass
        try:
            with signals_raise(), self._progress() as progress:
                task = progress.add_task(
                    "sweep", total=len(todo), phase="starting", trial="", eta=""
                )

                def phase(text: str) -> None:
                    progress.update(task, phase=text)

                batch, started, ran = todo or (more() if more else []), time.monotonic(), 0
                while batch:
                    eta = live_eta(started, ran, len(batch), more)
                    progress.update(task, total=ran + len(batch), eta=eta)
                    for unit in self._units(batch):
                        current = [trial["id"] for trial in unit]
                        progress.update(task, trial=_unit_label(unit))
                        statuses = self._run_unit(controller, unit, phase)
                        current, ran = [], ran + len(unit)
                        for trial, status in zip(unit, statuses, strict=True):
                            self.summary.count(self.store, trial, status)
                            self._breaker(controller, trial, status, phase)
                        left = int(progress.tasks[0].total or 0) - ran
                        eta = live_eta(started, ran, left, more)
                        progress.update(task, advance=len(unit), eta=eta)
                    batch = more() if more else []
        except (KeyboardInterrupt, SweepBlocked, ServiceBroken) as exc:
            self.summary.interrupted = isinstance(exc, KeyboardInterrupt)
            self.summary.blocked = str(exc) if isinstance(exc, SweepBlocked) else None
            self.summary.broken = str(exc) if isinstance(exc, ServiceBroken) else None
            for trial_id in current:
                self.store.finish_trial(trial_id, "interrupted")
        finally:
            with signals_ignored():
                self._leave(controller)

    def _leave(self, controller: Controller) -> None:
        """Restore the service as it was (`restore.py`); with `--apply`, an ended sweep
        only stops it (the CLI applies the recommendation next)."""
        summary = self.summary
        ended = not (summary.interrupted or summary.blocked or summary.broken)
        if ended and not self.restore_at_end:
            controller.close()
            return
        self.console.print("restoring the service as it was before the sweep ...")
        summary.restored = restore(controller, summary.before, self.spec.baseline)

    def _breaker(self, controller: Controller, trial: TrialRow, status: str, phase: Phase) -> None:
        """The breaker (`breaker.py`): at its threshold, the baseline is started as a control
        (unless it is in the streak: it failed already); if it fails too, ServiceBroken stops
        the sweep and the streak's trials are reopened."""
        failure = self.store.attempts(trial["id"])[-1]["failure"] if status == "failed" else None
        if not self.breaker.record(trial["id"], status, failure):
            return
        streak = list(self.breaker.streak)
        self.console.print(
            f"[yellow]breaker[/]: {len(streak)} configs in a row failed with {escape(str(failure))}"
        )
        outcome = self._control(controller, trial, streak, phase)
        if outcome is None:
            self.breaker.cleared()
            return
        self.store.reopen_trials(streak)
        summary = self.summary
        summary.failed -= len(streak)
        del summary.failures[-len(streak) :]  # the streak's lines: they run again on resume
        summary.failure_classes[str(failure)] -= len(streak)
        summary.failure_classes += Counter()  # drop the zero count
        raise ServiceBroken(stopped_line(str(failure), outcome))

    def _control(
        self, controller: Controller, trial: TrialRow, streak: list[int], phase: Phase
    ) -> dict[str, object] | None:
        """The baseline's failure (its trial in the streak, or a control start); None: READY."""
        rows = [t for t in self.store.trials(self.summary.sweep_id) if t["id"] in streak]
        failed_baseline = [t for t in rows if t["is_baseline"]]
        if failed_baseline:
            self.console.print("breaker: the baseline failed the same way in this streak")
            return failed_outcome(self.store.attempts(failed_baseline[-1]["id"])[-1])
        baseline = self.spec.baseline
        if baseline is None:
            return {"failure": "no baseline to check", "detail": "[sweep] baseline is unset"}
        self.console.print("breaker: starting the baseline as a control")
        folder = self.workdir / "control" / f"after-trial-{trial['id']}"
        outcome = become_ready(controller, baseline, folder, phase).to_dict()
        if not outcome.get("ready"):
            return outcome
        self.console.print("breaker: the baseline is READY, so these configs fail on their own")
        return None

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("trial {task.fields[trial]}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[phase]}", style="cyan", markup=False),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}", markup=False),
            console=self.console,
            transient=False,
        )

    def _units(self, batch: list[TrialRow]) -> list[list[TrialRow]]:
        """What runs as one: a trial, or with `interleave = "request"` a pass's trials."""
        if self.spec.interleave != "request":
            return [[trial] for trial in batch]
        units: list[list[TrialRow]] = []
        for trial in batch:
            if units and units[-1][0]["repeat"] == trial["repeat"]:
                units[-1].append(trial)
            else:
                units.append([trial])
        return units

    def _run_unit(self, controller: Controller, unit: list[TrialRow], phase: Phase) -> list[str]:
        if self.spec.interleave != "request":
            return [self._trial(controller, unit[0], phase)]
        from ddtune.sweep.run.interleaved import run_interleaved_pass

        return run_interleaved_pass(self, controller, unit, phase)

    def retry(
        self, controller: Controller, trial: TrialRow, error: str | None, phase: Phase
    ) -> str:
        """After a first attempt made elsewhere (an interleaved pass): done, or the rest alone."""
        if error is None:
            return "done"
        self._say_failed(trial, 1, error)
        return self._trial(controller, trial, phase, first=2)

    def _say_failed(
        self, trial: TrialRow, attempt: int, error: str, attempts: int | None = None
    ) -> None:
        self.console.print(
            f"[red]trial {escape(trial['label'])} r{trial['repeat']} "
            f"attempt {attempt}/{attempts or self.spec.retry.attempts} failed[/]: {escape(error)}"
        )

    def _trial(self, controller: Controller, trial: TrialRow, phase: Phase, first: int = 1) -> str:
        """Attempts `first`.. of one trial; returns its final status (done | failed)."""
        config = self.store.trial_config(trial)
        retry = self.spec.retry
        attempts = self.breaker.attempts(retry.attempts)
        for attempt in range(first, attempts + 1):
            if attempt > 1:
                phase(f"backoff {retry.backoff * 2 ** (attempt - 2):.0f}s")
                time.sleep(retry.backoff * 2 ** (attempt - 2))
            attempt_id, number = self.store.begin_attempt(trial["id"])
            folder = attempt_dir(self.workdir, trial["id"], trial["label"], trial["repeat"], number)
            folder.mkdir(parents=True, exist_ok=True)
            error = self._attempt(controller, trial, config, attempt_id, folder, phase)
            if error is None:
                return "done"
            self._say_failed(trial, attempt, error, attempts)
        self.store.finish_trial(trial["id"], "failed")
        return "failed"

    def _attempt(
        self,
        controller: Controller,
        trial: TrialRow,
        config: Config,
        attempt_id: int,
        attempt_dir: Path,
        phase: Phase,
    ) -> str | None:
        """One reconfigure + bench (`attempt.py`); stores the outcome; a failure line or None.

        With `passes_per_start` > 1 the next pass of the same config in the same block
        reuses the running server instead of reconfiguring (`reuse`).
        """
        key = (trial["label"], block_of(trial["repeat"], self.spec.passes_per_start))
        reuse = self._serving[1] if self._serving and self._serving[0] == key else None
        ready: list[Outcome] = []

        def on_ready(outcome: Outcome) -> None:
            ready.append(outcome)
            note_ready(self.store, attempt_id, attempt_dir, outcome.to_dict())

        report = execute_attempt(
            controller,
            self.spec.bench,
            self.spec.service.engine,
            config,
            attempt_dir,
            phase,
            on_ready=on_ready,
            reuse=reuse,
        )
        error = self.store_attempt(trial, attempt_id, attempt_dir, report)
        if self.spec.passes_per_start > 1:
            self._serving = (key, ready[0]) if error is None and ready else None
        return error

    def store_attempt(
        self, trial: TrialRow, attempt_id: int, folder: Path, report: AttemptReport
    ) -> str | None:
        """Store one attempt's report; its failure line, or None when the trial is done.

        Raises SweepBlocked when a process ddtune never stops holds the port."""
        for leftover in report.outcome.get("reclaimed") or ():  # [service] reclaim_leftovers
            self.console.print(f"[yellow]reclaimed[/] {escape(leftover)}")
        error = store_report(self.store, trial["id"], attempt_id, folder, report, self.hardware)
        blocked = blocked_by(report)
        if blocked:  # retries cannot help
            raise SweepBlocked(blocked)
        return error


def _unit_label(unit: list[TrialRow]) -> str:
    first = unit[0]
    if len(unit) == 1:
        return f"{first['label']} r{first['repeat']}"
    return f"pass {first['repeat']} ({len(unit)} configs in turns)"


__all__ = ["TrialLoop", "run_sweep", "trial_loop"]
