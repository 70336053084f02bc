"""The sweep runner: plan → for each unfinished trial: reconfigure → READY → bench → store.

    1. Take the store's runner lock; trials a dead runner left `running` become
       `interrupted`; create the sweep and its trials on the first run.
    2. For each trial that is pending or interrupted (done and failed ones are
       kept as they are; `sweep retry` reopens failed ones):
       a. attempt n: `controller.reconfigure(params, attempt_dir, user_vars=...,
          on_phase=...)` runs the readiness protocol (stop, quiesce, start, wait
          for the new identity); each phase it announces shows in the progress line;
       b. READY → `run_bench(...)` → samples + results + `done`, one transaction;
       c. not READY (or the bench failed) → the attempt is stored with its
          failure class, detail, timings and log tail, and retried after a backoff;
       d. all attempts failed → the trial is `failed`; the sweep goes on.
    3. Ctrl-C / SIGTERM: the current trial becomes `interrupted`, the service is
       stopped (`controller.close()`), and the exit code is 130 with a resume hint.

Every failure line says class + detail + log path; nothing is a bare "skip".
See docs/architecture.md "Sweep".
"""

from __future__ import annotations

import re
import signal
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ddtune.sweep.plan import plan_spec
from ddtune.sweep.spec import Config, SweepSpec
from ddtune.sweep.store import Store

if TYPE_CHECKING:
    from ddtune.services import Controller, Outcome

RESUMABLE = ("pending", "interrupted")
PHASE_TEXT = {  # the controller's phase (ddtune.services.protocol.PHASES) → the progress line
    "preflight": "preflight",
    "snapshot": "snapshot of the running instance",
    "stop": "stopping",
    "quiesce": "quiescing",
    "start": "starting",
    "poll": "loading (waiting for READY)",
}
Phase = Callable[[str], None]  # shows a text in the progress line


class SweepInterrupted(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM (SIGINT already raises KeyboardInterrupt)."""


@dataclass
class RunSummary:
    sweep_id: int
    store_path: Path
    planned: int  # trials in the sweep
    already_done: int  # finished before this run (resume)
    done: int = 0
    failed: int = 0
    interrupted: bool = False
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)  # one line per failed trial

    @property
    def exit_code(self) -> int:
        return 130 if self.interrupted else 0

    def print(self, console: Console, title: str = "sweep") -> None:
        """The counts, then one line per failed trial (class, detail, log path)."""
        console.print(
            f"{title}: {self.done} trial(s) done now, {self.already_done} earlier, "
            f"{self.failed} failed, of {self.planned}; {self.seconds:.0f} s; store {self.store_path}"
        )
        for line in self.failures:
            console.print(f"  [red]failed[/] {escape(line)}")


def default_store_path(spec: SweepSpec) -> Path:
    return Path("runs") / spec.name / "store.sqlite"


def run_sweep(
    spec: SweepSpec,
    store_path: Path,
    console: Console | None = None,
    resume_hint: str | None = None,
    reopen_failed: bool = False,
    only_reopened: bool = False,
) -> RunSummary:
    """Run (or resume) the sweep; see the module docstring for the steps."""
    console = console or Console(stderr=True)
    started = time.monotonic()
    store = Store(store_path)
    try:
        store.acquire()  # 1
        store.recover_if_unlocked()
        sweep_id = store.open_sweep(spec.name, spec.text, spec.hash, plan_spec(spec), spec.base_dir)
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
        )
        if todo:
            TrialLoop(spec, store, store_path.parent.resolve(), console, summary).run(todo)  # 2, 3
        if summary.interrupted:
            hint = resume_hint or f"ddtune sweep run {spec.source} --store {store_path}"
            console.print(
                f"[yellow]interrupted[/]; the service is stopped. resume with: {escape(hint)}"
            )
        summary.seconds = time.monotonic() - started
        return summary
    finally:
        store.close()


class TrialLoop:
    """Runs a list of trials against one controller, with progress and signals."""

    def __init__(
        self, spec: SweepSpec, store: Store, workdir: Path, console: Console, summary: RunSummary
    ) -> None:
        self.spec, self.store, self.workdir = spec, store, workdir
        self.console, self.summary = console, summary
        self.hardware = _hardware_now()

    def run(self, todo: list[sqlite3.Row]) -> None:
        from ddtune.services import build_controller

        controller = build_controller(self.spec.service, self.workdir)
        current: int | None = None
        try:
            with _signals_raise(), self._progress() as progress:
                task = progress.add_task("sweep", total=len(todo), phase="starting", trial="")

                def phase(text: str) -> None:
                    progress.update(task, phase=text)

                for index, trial in enumerate(todo, start=1):
                    current = trial["id"]
                    name = f"{index}/{len(todo)} {trial['label']} r{trial['repeat']}"
                    progress.update(task, trial=name)
                    status = self._trial(controller, trial, phase)
                    current = None
                    self._count(trial, status)
                    progress.advance(task)
        except KeyboardInterrupt:
            self.summary.interrupted = True
            if current is not None:
                self.store.finish_trial(current, "interrupted")
        finally:
            with _signals_ignored():
                controller.close()

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("trial {task.fields[trial]}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[phase]}", style="cyan", markup=False),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )

    def _count(self, trial: sqlite3.Row, status: str) -> None:
        if status == "done":
            self.summary.done += 1
        else:
            self.summary.failed += 1
            last = self.store.attempts(trial["id"])[-1]
            self.summary.failures.append(
                f"{trial['label']} r{trial['repeat']}: {last['failure']} — {last['detail']} "
                f"(log: {last['log_tail_path'] or 'none'})"
            )

    def _trial(self, controller: Controller, trial: sqlite3.Row, phase: Phase) -> str:
        """All attempts of one trial; returns its final status (done | failed)."""
        config = self.store.trial_config(trial)
        retry = self.spec.retry
        for attempt in range(1, retry.attempts + 1):
            if attempt > 1:
                phase(f"backoff {retry.backoff * 2 ** (attempt - 2):.0f}s")
                time.sleep(retry.backoff * 2 ** (attempt - 2))
            attempt_id, number = self.store.begin_attempt(trial["id"])
            attempt_dir = (
                self.workdir
                / "trials"
                / f"{trial['id']:04d}-{_slug(trial['label'])}-r{trial['repeat']}"
                / f"attempt-{number}"
            )
            attempt_dir.mkdir(parents=True, exist_ok=True)
            error = self._attempt(controller, trial, config, attempt_id, attempt_dir, phase)
            if error is None:
                return "done"
            self.console.print(
                f"[red]trial {escape(trial['label'])} r{trial['repeat']} "
                f"attempt {attempt}/{retry.attempts} failed[/]: {escape(error)}"
            )
        self.store.finish_trial(trial["id"], "failed")
        return "failed"

    def _attempt(
        self,
        controller: Controller,
        trial: sqlite3.Row,
        config: Config,
        attempt_id: int,
        attempt_dir: Path,
        phase: Phase,
    ) -> str | None:
        """One reconfigure + bench; stores the outcome; returns a failure line or None."""
        phase("reconfiguring")
        outcome = controller.reconfigure(
            config.params,
            attempt_dir,
            user_vars=config.user_vars(),
            on_phase=lambda name: phase(PHASE_TEXT.get(name, name)),
        )
        tail_path = _write_tail(attempt_dir, outcome)
        timings, identity = dict(outcome.timings), dict(outcome.identity)
        if not outcome.ready:
            failure = outcome.failure or "not_ready"
            detail = outcome.detail or "the controller gave no detail"
            seen = {"timings": timings, "identity": identity, "log_tail_path": tail_path}
            self.store.fail_attempt(attempt_id, failure, detail, **seen)
            return f"{failure} — {detail} (log: {tail_path})"
        self.store.note_attempt(
            attempt_id, timings=timings, identity=identity, log_tail_path=tail_path
        )
        phase("benchmarking")
        return self._bench(trial["id"], attempt_id, outcome.base_url, timings, tail_path)

    def _bench(
        self,
        trial_id: int,
        attempt_id: int,
        base_url: str,
        timings: dict[str, float],
        tail_path: str | None,
    ) -> str | None:
        """The bench against the READY server; stores its result, or the error as a failure."""
        from ddtune.bench import run_bench

        started = time.monotonic()
        try:
            result = run_bench(
                base_url,
                self.spec.bench,
                server_kind=self.spec.service.profile,
                identity=None,  # bench snapshots what serves now; the store merges both views
                progress=False,  # the sweep's own progress line is live
            )
        except Exception as exc:  # a server dying mid-bench must not stop the sweep
            detail = f"{type(exc).__name__}: {exc}"
            self.store.fail_attempt(attempt_id, "bench_error", detail, log_tail_path=tail_path)
            return f"bench_error — {detail} (log: {tail_path})"
        bench = result.to_dict()
        timings["bench_s"] = round(time.monotonic() - started, 3)
        hardware = bench.get("hardware") or self.hardware
        self.store.record_result(trial_id, attempt_id, bench, timings=timings, hardware=hardware)
        return None


def _write_tail(attempt_dir: Path, outcome: Outcome) -> str | None:
    """Keep the controller's log tail next to the attempt; return its path."""
    if outcome.log_tail:
        path = attempt_dir / "log_tail.txt"
        path.write_text(outcome.log_tail)
        return str(path)
    return outcome.log_path or None


def _hardware_now() -> dict[str, Any]:
    """Recorded with every attempt, failed ones included."""
    from ddtune.bench.hardware import hardware_fingerprint

    return hardware_fingerprint()


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-")[:40]


@contextmanager
def _signals_raise() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C for the duration (main thread only)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SweepInterrupted(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _signals_ignored() -> Iterator[None]:
    """While cleaning up, a second Ctrl-C must not leave a server running."""
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
