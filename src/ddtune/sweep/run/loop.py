"""The sweep runner: for each unfinished trial, reconfigure → READY → bench → store.

    summary = run_sweep(spec, store_path, console, on_pass=live_report, checked=checked)

0. The checks before the first stop (`ddtune.sweep.checks`), once per command:
   the caller's `checked`, else run here; a refusal is exit 2 with nothing stopped.
1. The store's runner lock; trials a dead runner left `running` become
   `interrupted`; the sweep prepared once (`plan/prepare.py`) and opened.
2. The service as a context (`services/session.py`): what served is noted before
   the first stop and put back (READY) at the end, on Ctrl-C / SIGTERM and at
   the breaker; `restore_at_end=False` (`sweep run --apply`) leaves an ended
   sweep's service stopped for the apply.
3. For each trial that is pending or interrupted (done and failed ones are kept;
   `sweep retry` reopens failed ones), then each batch the strategy adds
   (`next_batch()`: the next pass, bench or proposal) until it has none:
   attempts with the one `AttemptPolicy` (`policy.py`: store, retry after a
   backoff, stop at a port held by a process ddtune never stops, the breaker);
   `passes_per_start` > 1 (and a restart-bound race) benches the start still
   serving when the next trial has the same config and block;
   `interleave = "request"`: a pass's trials as one unit (`interleaved.py`);
   a pass's last trial finished: `on_pass(store, False)` (the live report).

Exit codes (`RunSummary.exit_code`, docs/sweeps.md "Exit codes"): 0 done, 1 failed
or the breaker, 2 bad input (step 0), 3 interrupted, 4 a held port. Every failure
line says class + detail + log path. See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ddtune.services import Owner, build_controller
from ddtune.services.engine_check import EngineCheckReport
from ddtune.services.session import ServiceSession
from ddtune.stats.blocked import block_of
from ddtune.sweep.checks import check_sweep
from ddtune.sweep.plan.costs import live_eta
from ddtune.sweep.plan.prepare import Sweep, prepare
from ddtune.sweep.plan.strategies import Strategy
from ddtune.sweep.run.attempt import Phase, become_ready, execute_attempt
from ddtune.sweep.run.common import RESUMABLE, RunSummary, stopping
from ddtune.sweep.run.policy import AttemptPolicy
from ddtune.sweep.spec.parse import Config, SweepSpec
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.files import attempt_dir
from ddtune.sweep.store.rows import TrialRow

if TYPE_CHECKING:
    from ddtune.bench.matrix import BenchMatrix
    from ddtune.services import Controller, Outcome
    from ddtune.sweep.run.ray.driver import SlotLoop

More = Callable[[], list[TrialRow]]


def run_sweep(
    spec: SweepSpec,
    store_path: Path,
    console: Console | None = None,
    resume_hint: str | None = None,
    reopen_failed: bool = False,
    only_reopened: bool = False,
    on_pass: Callable[[Store, Sweep, bool], None] | None = None,
    checked: EngineCheckReport | None = None,
    restore_at_end: bool = True,
) -> RunSummary:
    """Run (or resume) the sweep; the module docstring's steps. `on_pass(store, sweep,
    final)` runs after every finished pass and at the end, with the sweep prepared here
    (`sweep/reporting.py`: the live report)."""
    console = console or Console(stderr=True)
    started = time.monotonic()
    if checked is None:
        checked = check_sweep(spec, store_path)  # 0
    if checked.engine is not None or not spec.service.engine_check:
        console.print(escape("\n".join(checked.lines())))
    store = Store(store_path)
    try:
        store.acquire()  # 1
        store.recover_if_unlocked()
        sweep = prepare(spec, store)  # a new sweep's mode is stored with it; then it stays
        spec = sweep.run_spec
        sweep_id = store.open_sweep(
            spec.name, spec.text, spec.hash, list(sweep.plan), spec.base_dir, sweep.mode
        )
        todo, summary = _open_trials(store, sweep_id, console, reopen_failed, only_reopened)
        summary.on_pass, summary.sweep = on_pass, sweep
        strategy = None if only_reopened or not sweep.strategy.plans_later else sweep.strategy
        console.print(escape(sweep.estimate_text()))
        if todo or strategy is not None:
            loop = trial_loop(spec, store, store_path.parent.resolve(), console, summary)
            if isinstance(loop, TrialLoop):  # a Ray slot restores whatever ended the run
                loop.restore_at_end = restore_at_end
            loop.bench_for = sweep.strategy.bench_for  # what each trial's bench measures
            more = None if strategy is None else partial(strategy.next_batch, store, sweep_id)
            loop.run(todo, more)  # 2, 3
        summary.planned = len(store.trials(sweep_id))  # a race or search added trials
        if not summary.interrupted:
            summary.report(store, final=True)  # the trials of an unfinished pass, too
        hint = resume_hint or f"ddtune sweep run {spec.source} --store {store_path}"
        _say_how_it_ended(console, summary, strategy, hint)
        summary.seconds = time.monotonic() - started
        return summary
    finally:
        store.close()


def _open_trials(
    store: Store, sweep_id: int, console: Console, reopen_failed: bool, only_reopened: bool
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
        store.path,
        len(store.trials(sweep_id)),
        len(store.trials(sweep_id, ("done",))),
        failed_before=len(store.trials(sweep_id, ("failed",))),
    )
    return todo, summary


def _say_how_it_ended(
    console: Console, summary: RunSummary, strategy: Strategy | None, hint: str
) -> None:
    """The strategy's outcome when it ran to the end; the resume command when it did not;
    then how the service was left (`services/session.py`)."""
    if strategy is not None and not summary.stopped:
        console.print(escape(strategy.outcome()))
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
        self.policy = AttemptPolicy(spec, store, console, summary)
        self._serving: tuple[tuple[str, int], Outcome] | None = None  # passes_per_start reuse
        self.bench_for: Callable[[TrialRow, BenchMatrix], BenchMatrix] = lambda _, m: m
        self.restore_at_end = True  # False (`sweep run --apply`): an ended sweep stays stopped

    def run(self, todo: list[TrialRow], more: More | None = None) -> None:
        """The trials of `todo`, then each batch `more()` returns, until it returns []."""
        owner = Owner.current(sweep=self.spec.name, store=str(self.store.path.resolve()))
        controller = build_controller(self.spec.service, self.workdir, owner=owner)
        with ServiceSession(controller, self.spec.baseline, self.console.print) as service:
            self.summary.before = service.before
            self._loop(controller, todo, more)
            service.leave_stopped = not self.summary.stopped and not self.restore_at_end
        self.summary.restored = service.restored
        self.policy.end_streak()

    def _loop(self, controller: Controller, todo: list[TrialRow], more: More | None) -> None:
        current: list[int] = []  # the trials in flight: one, or a request-interleaved pass

        def interrupt() -> None:
            for trial_id in current:
                self.store.finish_trial(trial_id, "interrupted")

        with stopping(self.summary, interrupt), self._progress() as progress:
            task = progress.add_task("sweep", total=len(todo), phase="starting", trial="", eta="")

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
                        self._finished(controller, trial, status, phase)
                    left = int(progress.tasks[0].total or 0) - ran
                    eta = live_eta(started, ran, left, more)
                    progress.update(task, advance=len(unit), eta=eta)
                batch = more() if more else []

    def _finished(self, controller: Controller, trial: TrialRow, status: str, phase: Phase) -> None:
        """Counted; at the breaker's threshold the baseline starts as a control."""
        if self.policy.finished(trial, status):
            baseline = self.policy.control_start()
            folder = self.workdir / "control" / f"after-trial-{trial['id']}"
            self.policy.control_result(become_ready(controller, baseline, folder, phase))

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
            return [self.trial(controller, unit[0], phase)]
        from ddtune.sweep.run.interleaved import run_interleaved_pass

        errors = run_interleaved_pass(self.policy, self.workdir, controller, unit, phase)
        return [self._retried(controller, t, e, phase) for t, e in zip(unit, errors, strict=True)]

    def _retried(
        self, controller: Controller, trial: TrialRow, error: str | None, phase: Phase
    ) -> str:
        """After a first attempt in an interleaved pass: done, or the rest of its attempts."""
        if error is None:
            return "done"
        if (wait := self.policy.after(trial, 1, error)) is None:
            return "failed"
        return self.trial(controller, trial, phase, first=2, wait=wait)

    def trial(
        self,
        controller: Controller,
        trial: TrialRow,
        phase: Phase,
        first: int = 1,
        wait: float | None = None,
    ) -> str:
        """Attempts `first`.. of one trial, after `wait` (the backoff, when `first` > 1);
        returns its final status (done | failed)."""
        config, used = self.store.trial_config(trial), first
        while True:
            if wait is not None:
                self.policy.back_off(wait, phase)
            attempt_id, number = self.store.begin_attempt(trial["id"])
            folder = attempt_dir(self.workdir, trial["id"], trial["label"], trial["repeat"], number)
            error = self._attempt(controller, trial, config, attempt_id, folder, phase)
            if error is None:
                return "done"
            if (wait := self.policy.after(trial, used, error)) is None:
                return "failed"
            used += 1

    def _attempt(
        self,
        controller: Controller,
        trial: TrialRow,
        config: Config,
        attempt_id: int,
        folder: Path,
        phase: Phase,
    ) -> str | None:
        """One reconfigure + bench (`attempt.py`), settled by the policy: a failure line or
        None. With `passes_per_start` > 1 the next pass of the same config in the same block
        reuses the running server instead of reconfiguring."""
        key = (trial["label"], block_of(trial["repeat"], self.spec.passes_per_start))
        reuse = self._serving[1] if self._serving and self._serving[0] == key else None
        report = execute_attempt(
            controller,
            self.bench_for(trial, self.spec.bench),
            self.spec.service.engine,
            config,
            folder,
            phase,
            on_ready=partial(self.policy.note_ready, attempt_id, folder),
            reuse=reuse,
        )
        error = self.policy.settle(trial, attempt_id, folder, report)
        if self.spec.passes_per_start > 1:  # done: READY, and on_ready had this outcome
            self._serving = (key, report.outcome) if error is None else None
        return error


def _unit_label(unit: list[TrialRow]) -> str:
    first = unit[0]
    if len(unit) == 1:
        return f"{first['label']} r{first['repeat']}"
    return f"pass {first['repeat']} ({len(unit)} configs in turns)"


__all__ = ["TrialLoop", "run_sweep", "trial_loop"]
