"""The result of one reconfigure attempt, and the failure classes it can carry.

Failure classes (docs/readiness.md "Services"):

    crashed(<exit code or signal>)  the new process died while starting
    oom                             it died with an out-of-memory message
    port_in_use                     the port is held by a process that is not ours
                                    (`port_holders` names those ddtune will not stop)
    stale_instance                  the server answering is not the new instance
    config_mismatch                 the new instance reports another configuration
    instance_changed                (hot) the server restarted instead of reconfiguring
    gpu_memory_not_released        GPU memory did not return to the baseline
    render_failed / start_failed rendering or the start command itself failed
    timeout:<phase>                 stop, quiesce, start, health, identity, generate
    cancelled                       close() was called while reconfigure ran
    error                           an unexpected I/O error (the detail names it)
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

LOG_TAIL_LINES = 200

OOM_PATTERNS = re.compile(
    r"out of memory|OutOfMemoryError|CUDA error: out of memory|Cannot allocate memory|"
    r"MemoryError|oom-kill",
    re.IGNORECASE,
)
PORT_IN_USE_PATTERNS = re.compile(r"address already in use|EADDRINUSE|errno 98", re.IGNORECASE)


class PhaseFailure(Exception):
    """Raised inside the protocol to end an attempt with a failure class."""

    def __init__(
        self, failure: str, detail: str, holders: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(f"{failure}: {detail}")
        self.failure = failure
        self.detail = detail
        self.holders = holders or []  # port_in_use by processes ddtune will not stop


@dataclass
class Outcome:
    """What `controller.reconfigure()` returns; saved with the attempt."""

    ready: bool
    failure: str | None = None
    detail: str = ""
    log_tail: str = ""
    log_path: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    identity: dict[str, Any] = field(default_factory=dict)
    previous_identity: dict[str, Any] = field(default_factory=dict)
    base_url: str = ""
    notes: list[str] = field(default_factory=list)
    leftover_pids: list[int] = field(default_factory=list)
    port_holders: list[dict[str, Any]] = field(default_factory=list)  # Holder.to_dict()s
    reclaimed: list[str] = field(default_factory=list)  # leftovers stopped to free the port

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        return cls(**data)

    def fail(self, failure: str, detail: str, holders: list[dict[str, Any]] | None = None) -> None:
        """Record the failure class and its one-line detail (`ready` stays False).

        `holders`: the processes ddtune will not stop that hold the port; a
        failure with holders cannot be cured by retrying (the runner stops).
        """
        self.ready, self.failure, self.detail = False, failure, detail
        self.port_holders = list(holders or [])

    @contextmanager
    def timed(self, key: str) -> Iterator[None]:
        """`with out.timed("start_s"):` records the block's duration in `timings[key]`."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.timings[key] = round(time.monotonic() - t0, 3)


def tail_lines(path: Path | None, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of a log file ("" when there is none)."""
    if path is None or not path.exists():
        return ""
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - 512 * 1024))
        text = handle.read().decode(errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def classify_exit(code: int | None, log_tail: str) -> str:
    """Failure class for a process that exited during start: oom, port_in_use or crashed(X)."""
    if OOM_PATTERNS.search(log_tail):
        return "oom"
    if PORT_IN_USE_PATTERNS.search(log_tail):
        return "port_in_use"
    if code is None:
        return "crashed(unknown)"
    if code < 0:
        try:
            return f"crashed({signal.Signals(-code).name})"
        except ValueError:
            return f"crashed(signal {-code})"
    return f"crashed({code})"
