"""The breaker: the same failure on consecutive configs is the service's, not the configs'.

    breaker = Breaker(spec.breaker)                 # [sweep] breaker, default 3 (0: off)
    attempts = breaker.attempts(spec.retry.attempts)
    if breaker.record(trial_id, status, failure):   # the streak reached the threshold
        outcome = run the baseline once as a control
        breaker.cleared() if outcome.ready else raise ServiceBroken(stopped_line(...))

A trial that fails after all its attempts opens (or extends) a streak of its
failure class; a trial that is done, or fails with another class, ends it.
While a streak is open, each next config gets one attempt (the first used the
whole retry): a fault of the service is not paid for twice per config. At
`threshold` configs in a row the loop starts the baseline as a control (unless
the baseline's own trial is in the streak: it failed already). READY:
the configs really fail, the streak is cleared and the sweep goes on. Not
READY: the service fails whatever the config; the loop raises `ServiceBroken`
(exit 1), the streak's trials are put back to `interrupted` (so the same
command reruns them once the fault is fixed) and the service is restored
(`restore.py`). A service that fails every start costs, with the default
retry of 2 and breaker 3: 2 + 1 + 1 starts of trials, 1 of the control (none when the
baseline's trial was one of the three): at most 5.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddtune.sweep.store.rows import AttemptRow

TAIL_LINES = 3  # log lines quoted in the stop line


class ServiceBroken(Exception):
    """The baseline failed as the configs did: the sweep stops (exit 1), resumable."""


@dataclass
class Breaker:
    threshold: int  # configs in a row with one failure class (0: never trips)
    failure: str | None = None  # the class of the open streak
    streak: list[int] = field(default_factory=list)  # its trial ids, oldest first

    def attempts(self, retry_attempts: int) -> int:
        """A trial's attempts: the whole retry, or one while a streak is open."""
        return 1 if self.threshold and self.streak else retry_attempts

    def record(self, trial_id: int, status: str, failure: str | None) -> bool:
        """One finished trial; True when the streak has reached the threshold."""
        if not self.threshold:
            return False
        if status != "failed":
            self.cleared()
            return False
        if failure != self.failure:
            self.failure, self.streak = failure, []
        self.streak.append(trial_id)
        return len(self.streak) >= self.threshold

    def cleared(self) -> None:
        self.failure, self.streak = None, []


def failed_outcome(attempt: AttemptRow) -> dict[str, Any]:
    """A stored failed attempt as the outcome `stopped_line` quotes (its log tail read back)."""
    path = attempt["log_tail_path"]
    tail = Path(path).read_text(errors="replace") if path and Path(path).is_file() else ""
    return {
        "failure": attempt["failure"],
        "detail": attempt["detail"],
        "log_tail": tail,
        "log_path": path,
    }


def stopped_line(failure: str, outcome: dict[str, Any]) -> str:
    """`the service fails whatever the config: <class>, <log tail>` for the summary."""
    tail = [line for line in (outcome.get("log_tail") or "").splitlines() if line.strip()]
    quoted = " | ".join(tail[-TAIL_LINES:]) or outcome.get("detail") or "no log"
    control = outcome.get("failure") or "not_ready"
    log = outcome.get("log_path") or "no log file"
    return (
        f"the service fails whatever the config: {failure}, {quoted} (the baseline failed "
        f"too: {control}; log {log}). Fix the service; the same "
        "command then resumes the sweep and reruns these configs"
    )


__all__ = ["Breaker", "ServiceBroken", "failed_outcome", "stopped_line"]
