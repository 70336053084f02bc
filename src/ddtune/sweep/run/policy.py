"""What every loop does with an attempt: store it, retry it, stop at a held port, the breaker.

    policy = AttemptPolicy(spec, store, console, summary)
    error = policy.settle(trial, attempt_id, folder, report)  # stored; None: the trial is done
    wait = policy.after(trial, used, error)     # said; the backoff, or None: the trial failed
    policy.back_off(wait, phase)                # that wait, said in the progress line
    if policy.finished(trial, status):          # counted; True: the breaker tripped
        control = policy.control_start()        # the baseline to start as a control
        policy.control_result(outcome_of(control))  # READY: cleared; else ServiceBroken

The local loop (`loop.py`), a request-interleaved pass (`interleaved.py`) and
the Ray driver (`ray/driver.py`) all go through it; it is the one writer of
attempts into the store. `settle` raises `SweepBlocked` when a process ddtune
never stops holds the port (retries cannot help; exit 4).

The breaker (docs/engines.md "Safe on a production service"): a trial that fails
after all its attempts opens (or extends) a streak of its class; a done trial, or
another class, ends it. An open streak gives each config one attempt and holds its
failures back from the run's tally: a READY control counts them, a failed one
(`ServiceBroken`, exit 1) puts the trials back to pending, never counted. No control
starts when the baseline's own trial is in the streak: it failed already.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rich.console import Console
from rich.markup import escape

from ddtune.services.outcome import Outcome
from ddtune.sweep.run.attempt import AttemptReport
from ddtune.sweep.run.common import RunSummary, ServiceBroken, SweepBlocked
from ddtune.sweep.store.rows import AttemptRow, TrialRow

if TYPE_CHECKING:
    from ddtune.sweep.spec.parse import Config, SweepSpec
    from ddtune.sweep.store.db import Store

TAIL_LINES = 3  # log lines quoted in the breaker's stop line
T = TypeVar("T")


@dataclass
class Breaker(Generic[T]):
    """The streak: consecutive configs failed with one class (module docstring)."""

    threshold: int  # configs in a row with one failure class (0: never trips)
    failure: str | None = None  # the class of the open streak
    streak: list[T] = field(default_factory=list)  # its trials, oldest first

    def attempts(self, retry_attempts: int) -> int:
        """A trial's attempts: the whole retry, or one while a streak is open."""
        return 1 if self.threshold and self.streak else retry_attempts

    def record(self, trial: T, status: str, failure: str | None) -> bool:
        """One finished trial; True when the streak has reached the threshold."""
        if not self.threshold:
            return False
        if status != "failed":
            self.cleared()
            return False
        if failure != self.failure:
            self.failure, self.streak = failure, []
        self.streak.append(trial)
        return len(self.streak) >= self.threshold

    def cleared(self) -> None:
        self.failure, self.streak = None, []


class AttemptPolicy:
    """Retry, backoff, a held port and the breaker for one run (module docstring)."""

    def __init__(
        self, spec: SweepSpec, store: Store, console: Console, summary: RunSummary
    ) -> None:
        from ddtune.bench.hardware import hardware_fingerprint

        self.spec, self.store, self.console, self.summary = spec, store, console, summary
        self.retry = spec.retry
        self.hardware = hardware_fingerprint()  # recorded with every attempt, failed ones too
        self.breaker: Breaker[TrialRow] = Breaker(spec.breaker)

    # --- one trial's attempts ----------------------------------------------------------

    def back_off(self, seconds: float, phase: Callable[[str], None]) -> None:
        """Wait `seconds` (what `after` returned), saying so in the progress line."""
        phase(f"backoff {seconds:.0f}s")
        time.sleep(seconds)

    def note_ready(self, attempt_id: int, folder: Path, outcome: Outcome) -> None:
        """A READY attempt's timings, identity and log path, saved before its bench."""
        seen = {"timings": outcome.timings, "identity": outcome.identity}
        self.store.note_attempt(attempt_id, **seen, log_tail_path=_write_tail(folder, outcome))

    def settle(
        self, trial: TrialRow, attempt_id: int, folder: Path, report: AttemptReport
    ) -> str | None:
        """Store the attempt; its failure line, or None when the trial is done. Raises
        `SweepBlocked` when a process ddtune never stops holds the port."""
        outcome = report.outcome
        for leftover in outcome.reclaimed:  # [service] reclaim_leftovers
            where = f" slot {report.slot}:" if report.slot else ""
            self.console.print(f"[yellow]reclaimed[/]{escape(where)} {escape(leftover)}")
        tail = _write_tail(folder, outcome)
        seen: dict[str, Any] = {
            "timings": dict(outcome.timings),
            "identity": dict(outcome.identity),
            "log_tail_path": tail,
            "hardware": report.hardware or self.hardware,
        }
        error = report.error()
        if error is not None:
            failure, _, detail = error.partition(" — ")
            self.store.fail_attempt(attempt_id, failure, detail, **seen)
            if (blocked := report.blocked()) is not None:
                where = f"slot {report.slot}: " if report.slot else ""
                raise SweepBlocked(where + blocked)
            return f"{error} (log: {tail})"
        assert report.bench is not None
        seen["timings"]["bench_s"] = report.bench_s or 0.0
        seen["hardware"] = report.bench.hardware or seen["hardware"]
        self.store.record_result(trial["id"], attempt_id, report.bench, **seen)
        return None

    def after(self, trial: TrialRow, used: int, error: str) -> float | None:
        """Attempt `used` failed with `error` (said here): the wait before the next attempt
        while attempts are left; else None, and the trial is finished as failed."""
        attempts = self.breaker.attempts(self.retry.attempts)  # 1 while a streak is open
        self.console.print(
            f"[red]trial {escape(trial['label'])} r{trial['repeat']} "
            f"attempt {used}/{attempts} failed[/]: {escape(error)}"
        )
        if used < attempts:  # retry.backoff, doubled after each failure
            return float(self.retry.backoff * 2 ** (used - 1))
        self.store.finish_trial(trial["id"], "failed")
        return None

    # --- finished trials and the breaker -------------------------------------------------

    def finished(self, trial: TrialRow, status: str) -> bool:
        """Count a finished trial (done | failed); True when the breaker has tripped. A
        failure that opens or extends a streak is counted once the streak ends."""
        breaker = self.breaker
        failure = self.store.attempts(trial["id"])[-1]["failure"] if status == "failed" else None
        if status != "failed" or failure != breaker.failure:
            self.end_streak()
        tripped = breaker.record(trial, status, failure)
        if not breaker.streak:  # not held back: done, or the breaker is off
            self.summary.tally(self.store, trial, status)
        self.summary.landed(self.store, trial)  # its pass may be over: the live report
        return tripped

    def control_start(self) -> Config:
        """The breaker tripped: the baseline to start as a control. Raises `ServiceBroken`
        at once when the answer is known: the baseline's own trial failed in the streak,
        or there is no baseline."""
        streak = self.breaker.streak
        self.console.print(
            f"[yellow]breaker[/]: {len(streak)} configs in a row failed with "
            f"{escape(str(self.breaker.failure))}"
        )
        failed_baseline = [t for t in streak if t["is_baseline"]]
        if failed_baseline:
            self.console.print("breaker: the baseline failed the same way in this streak")
            attempt = self.store.attempts(failed_baseline[-1]["id"])[-1]
            self.control_result(_stored_outcome(attempt))
        if self.spec.baseline is None:
            detail = "[sweep] baseline is unset"
            self.control_result(Outcome(False, "no baseline to check", detail))
        assert self.spec.baseline is not None
        self.console.print("breaker: starting the baseline as a control")
        return self.spec.baseline

    def control_result(self, outcome: Outcome) -> None:
        """The control's outcome: READY clears the streak (the configs fail on their own);
        anything else stops the sweep with the streak's trials put back."""
        if outcome.ready:
            self.console.print("breaker: the baseline is READY, so these configs fail on their own")
            self.end_streak()
            return
        failure = str(self.breaker.failure)
        self.store.reopen_trials([t["id"] for t in self.breaker.streak])
        self.breaker.cleared()
        raise ServiceBroken(_stopped_line(failure, outcome))

    def end_streak(self) -> None:
        """The streak ended (or the run did): what it held back is counted."""
        for trial in self.breaker.streak:
            self.summary.tally(self.store, trial, "failed")
        self.breaker.cleared()


def _write_tail(folder: Path, outcome: Outcome) -> str | None:
    """Keep the controller's log tail next to the attempt; return its path."""
    if outcome.log_tail:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "log_tail.txt"
        path.write_text(outcome.log_tail)
        return str(path)
    return outcome.log_path or None


def _stored_outcome(attempt: AttemptRow) -> Outcome:
    """A stored failed attempt as the outcome the stop line quotes (its log tail read back)."""
    path = attempt["log_tail_path"]
    tail = Path(path).read_text(errors="replace") if path and Path(path).is_file() else ""
    return Outcome(False, attempt["failure"], attempt["detail"], tail, path)


def _stopped_line(failure: str, outcome: Outcome) -> str:
    """`the service fails whatever the config: <class>, <log tail>` for the summary."""
    tail = [line for line in outcome.log_tail.splitlines() if line.strip()]
    quoted = " | ".join(tail[-TAIL_LINES:]) or outcome.detail or "no log"
    control = outcome.failure or "not_ready"
    log = outcome.log_path or "no log file"
    return (
        f"the service fails whatever the config: {failure}, {quoted} (the baseline failed "
        f"too: {control}; log {log}). Fix the service; the same "
        "command then resumes the sweep and reruns these configs"
    )


__all__ = ["AttemptPolicy", "Breaker"]
