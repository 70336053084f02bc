"""The service under a sweep, as a context: snapshot on entry, restored on exit.

    with ServiceSession(controller, baseline) as service:   # `seen_before()`, read only
        outcome = service.controller.reconfigure(...)       # the trials
        service.leave_stopped = True                        # (`sweep run --apply`, ended)
    print(service.restored)                                 # how the service was left

Whatever ends the block (the last trial, Ctrl-C or SIGTERM, the breaker, an
error), the exit puts the service back as `seen_before` found it, through the
controller's own `restore` (written once per control: process, systemd, hooks,
hot; docs/engines.md "Safe on a production service"), with signals ignored so a
second Ctrl-C cannot leave a server running. `restored` is the line to print:
READY, or exactly what is wrong. `leave_stopped`: an ended sweep whose answer
is applied next only stops the service.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import httpx

if TYPE_CHECKING:
    from ddtune.params import DecodeParams
    from ddtune.services.outcome import Outcome

PROBE_TIMEOUT_S = 5.0


class Baseline(Protocol):
    """The config a hooks service is restored to (a sweep's `Config`)."""

    @property
    def params(self) -> DecodeParams: ...

    def user_vars(self) -> Mapping[str, Any]: ...

    def label(self) -> str: ...


@dataclass(frozen=True)
class Before:
    """What served before the sweep."""

    serving: bool  # the unit was active / a server answered on the port
    hot_config: dict[str, Any] | None = None  # hot: the running server's config


class Restorable(Protocol):
    """What a session uses of a controller (`protocol.Controller` is one)."""

    def seen_before(self) -> Before: ...

    def restore(self, before: Before, baseline: Baseline | None) -> str: ...

    def close(self) -> list[str]: ...


class ServiceSession:
    """`with ServiceSession(controller, baseline, announce) as service:` (module docstring)."""

    def __init__(
        self,
        controller: Restorable,
        baseline: Baseline | None,
        announce: Callable[[str], None] | None = None,
    ) -> None:
        self.controller, self.baseline = controller, baseline
        self.announce = announce or (lambda line: None)
        self.before = Before(False)
        self.leave_stopped = False
        self.restored: str | None = None

    def __enter__(self) -> ServiceSession:
        self.before = self.controller.seen_before()
        return self

    def __exit__(self, *exc: object) -> None:
        with signals_ignored():
            if self.leave_stopped:
                self.controller.close()
                return
            self.announce("restoring the service as it was before the sweep ...")
            self.restored = self.controller.restore(self.before, self.baseline)


def answers(base_url: str) -> bool:
    """Does a server answer on `base_url` (any status below 500)?"""
    try:
        with httpx.Client(timeout=PROBE_TIMEOUT_S, trust_env=False) as client:
            return client.get(base_url + "/v1/models").status_code < 500
    except httpx.HTTPError:
        return False


def restored_line(outcome: Outcome, done: str) -> str:
    """`restored: <done>: READY in N s`, or what is wrong and that it needs a hand."""
    if outcome.ready:
        return f"restored: {done}: READY in {outcome.timings.get('start_to_ready_s', 0):.1f} s"
    log = f"; log {outcome.log_path}" if outcome.log_path else ""
    return (
        f"NOT restored: {done} was tried and is not READY: {outcome.failure} — "
        f"{outcome.detail}{log}; the service needs a hand now"
    )


def stopped_line(notes: list[str]) -> str:
    """A service left stopped, as it was before the sweep (with what could not be stopped)."""
    left = f" ({'; '.join(notes)})" if notes else ""
    return f"the service is stopped, as it was before the sweep{left}"


@contextmanager
def signals_ignored() -> Iterator[None]:
    """While cleaning up, a second Ctrl-C must not leave a server running (in the main
    thread; elsewhere, e.g. a Ray slot's actor, signals do not reach the block anyway)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


__all__ = [
    "Baseline",
    "Before",
    "Restorable",
    "ServiceSession",
    "answers",
    "restored_line",
    "signals_ignored",
    "stopped_line",
]
