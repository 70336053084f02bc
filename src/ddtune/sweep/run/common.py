"""What every sweep loop shares: the run summary, exit codes and signals.

The local loop (`loop.py`) and the Ray driver (`ray/driver.py`) both count
finished trials into one `RunSummary`, whose `exit_code` is the command's
(docs/sweeps.md "Exit codes"), and stop the same way (`stopping`).
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from ddtune.sweep.store.rows import TrialRow

if TYPE_CHECKING:
    from ddtune.services.session import Before
    from ddtune.sweep.plan.prepare import Sweep
    from ddtune.sweep.spec.parse import SweepSpec
    from ddtune.sweep.store.db import Store

RESUMABLE = ("pending", "interrupted")

EXIT_DONE, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_BLOCKED = 0, 1, 2, 3, 4


class SweepInterrupted(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM (SIGINT already raises KeyboardInterrupt)."""


class SweepBlocked(Exception):
    """An attempt found the port held by a process ddtune never stops: retrying cannot help."""


class ServiceBroken(Exception):
    """The breaker: the baseline failed as the configs did; the sweep stops (exit 1), resumable."""


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
    failure_classes: Counter[str] = field(default_factory=Counter)  # this run's failed trials
    failed_before: int = 0  # failed in an earlier run and not reopened
    blocked: str | None = None  # why the sweep stopped early (the port's holder)
    broken: str | None = None  # the breaker stopped it: the service fails whatever the config
    restored: str | None = None  # how the service was left (`services/session.py`)
    before: Before | None = None  # what served before the sweep (None: the Ray slots')
    # after every finished pass, and (final=True) at the end of the run: the live report,
    # given the sweep the run prepared
    on_pass: Callable[[Store, Sweep, bool], None] | None = None
    sweep: Sweep | None = None  # the run's prepared sweep
    unreported: bool = False  # trials finished since `on_pass` last ran
    # pass -> its finished trials when `on_pass` last ran for it (a request-interleaved
    # pass is stored whole, then counted; a restart-bound race adds to an ended pass)
    reported_passes: dict[int, int] = field(default_factory=dict)

    @property
    def stopped(self) -> bool:
        """Did the run stop before its end (interrupted, a held port, the breaker)?"""
        return bool(self.interrupted or self.blocked or self.broken)

    def stop(self, why: BaseException) -> None:
        """Note why the run stopped: Ctrl-C / SIGTERM, a held port, or the breaker."""
        self.interrupted = isinstance(why, KeyboardInterrupt)
        self.blocked = str(why) if isinstance(why, SweepBlocked) else None
        self.broken = None if self.interrupted or self.blocked else str(why)

    @property
    def exit_code(self) -> int:
        """0 done, 1 failed, 3 interrupted, 4 blocked: see docs/sweeps.md "Exit codes"."""
        if self.interrupted:
            return EXIT_INTERRUPTED
        if self.blocked:
            return EXIT_BLOCKED
        if self.broken:
            return EXIT_FAILED
        return EXIT_FAILED if self.failed or self.failed_before else EXIT_DONE

    def landed(self, store: Store, trial: TrialRow) -> None:
        """A trial finished: when its pass has no unfinished trial and more finished ones
        than `on_pass` last saw in it, `on_pass` runs."""
        repeat = trial["repeat"]
        unfinished, finished = store.pass_counts(self.sweep_id, repeat)
        if finished <= self.reported_passes.get(repeat, 0):
            return  # a request-interleaved pass: stored whole, reported, counted after
        self.unreported = True
        if not unfinished:
            self.reported_passes[repeat] = finished
            self.report(store)

    def report(self, store: Store, final: bool = False) -> None:
        """`on_pass(store, False)` if trials finished since it last ran; then, at the end
        of the run (`final`), `on_pass(store, True)`."""
        if self.on_pass is None or self.sweep is None:
            return
        if self.unreported:
            self.unreported = False
            self.on_pass(store, self.sweep, False)
        if final:
            self.on_pass(store, self.sweep, True)

    def tally(self, store: Store, trial: TrialRow, status: str) -> None:
        """Done, or failed with its last attempt's class and detail."""
        if status == "done":
            self.done += 1
            return
        self.failed += 1
        last = store.attempts(trial["id"])[-1]
        self.failure_classes[last["failure"]] += 1
        self.failures.append(
            f"{trial['label']} r{trial['repeat']}: {last['failure']} — {last['detail']} "
            f"(log: {last['log_tail_path'] or 'none'})"
        )

    def print(self, console: Console, title: str = "sweep") -> None:
        """The counts, then one line per failed trial (class, detail, log path)."""
        console.print(
            f"{title}: {self.done} trial(s) done now, {self.already_done} earlier, "
            f"{self.failed} failed, of {self.planned}; {self.seconds:.0f} s; store {self.store_path}"
        )
        if self.failure_classes:  # `crashed(2): 2, port_in_use: 1`, most frequent first
            counts = ", ".join(f"{n}: {c}" for n, c in self.failure_classes.most_common())
            console.print(f"  failure classes: {escape(counts)}")
        for line in self.failures:
            console.print(f"  [red]failed[/] {escape(line)}")
        if self.failed_before:
            console.print(
                f"  {self.failed_before} trial(s) failed in an earlier run and were not rerun "
                f"(ddtune sweep retry --failed --store {self.store_path})"
            )


def default_store_path(spec: SweepSpec) -> Path:
    return Path("runs") / spec.name / "store.sqlite"


@contextmanager
def signals_raise() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C for the duration (main thread only)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SweepInterrupted(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def stopping(summary: RunSummary, interrupt: Callable[[], None]) -> Iterator[None]:
    """A loop's run, SIGTERM raised as Ctrl-C; a stop (Ctrl-C, a held port, the breaker) is
    noted in `summary` (`RunSummary.stop`), then `interrupt()` marks the trials in flight."""
    try:
        with signals_raise():
            yield
    except (KeyboardInterrupt, SweepBlocked, ServiceBroken) as exc:
        summary.stop(exc)
        interrupt()
