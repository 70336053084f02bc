"""The slot's half of a distributed sweep: one controller, one attempt at a time.

    runner = SlotRunner(name, service, bench, root, sweep, store)  # root/slots/<name>: its workdir
    runner.info()        # node address, pid, hardware fingerprint, leftovers reclaimed at start
    report = runner.run(task)                          # AttemptTask → AttemptReport
    runner.state()       # phase now; the READY outcome once the bench started
    runner.close()       # the service back as the slot found it (its controller's restore)

A Ray slot actor (`pool.py`) wraps one `SlotRunner`; tests drive it in
threads. Each slot has its own workdir, so its process tag prefix
(`ddtune.services.controllers.process.scope_prefix`) is its own: a slot started again
(after its actor, node or driver died) finds and stops the processes its
predecessor left behind, and never those of another slot.
See docs/sweeps.md "Scale out".
"""

from __future__ import annotations

import os
import socket
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddtune.services.outcome import Outcome
from ddtune.sweep.run.attempt import AttemptReport, become_ready, execute_attempt

if TYPE_CHECKING:
    from ddtune.bench.matrix import BenchMatrix
    from ddtune.services.spec import ServiceSpec
    from ddtune.sweep.spec.parse import Config


@dataclass(frozen=True)
class AttemptTask:
    """What the driver hands a slot: one attempt of one trial."""

    trial_id: int
    attempt_id: int
    number: int
    label: str
    repeat: int
    config: dict[str, Any]  # `Config.to_wire()`
    path: str  # the attempt's folder, relative to the sweep's work directory
    control: bool = False  # the breaker's control start: READY or not, no bench
    bench: dict[str, Any] | None = None  # the strategy's bench for it (None: the slot's own)


@dataclass
class SlotInfo:
    """A live slot as the driver knows it."""

    name: str
    node: str | None = None
    pid: int | None = None  # the process that runs the slot (its Ray actor)
    hardware: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # e.g. leftovers reclaimed at start


@dataclass
class Finished:
    """Events a slot pool reports to the driver: an attempt came back, ..."""

    slot: str
    report: AttemptReport


@dataclass
class Lost:
    """... the slot died (actor or node) during its attempt, ..."""

    slot: str
    detail: str


@dataclass
class Progress:
    """... or the slot's phase now (with the READY outcome once the bench started)."""

    slot: str
    phase: str
    ready: Outcome | None = None


Event = Finished | Lost | Progress


def _preload() -> None:
    """Import what an attempt runs (bench client, sandbox, spec) while the slot starts.

    ~3 s on 2 cores; paid inside the first attempt it would count as trial time
    (the local runner has these imported before its trial loop).
    """
    import ddtune.bench.runner  # noqa: F401
    import ddtune.sweep.spec.parse  # noqa: F401


class SlotRunner:
    """One service slot; see the module docstring."""

    def __init__(
        self,
        name: str,
        service: ServiceSpec,
        bench: BenchMatrix,
        root: str | Path,
        sweep: str | None = None,
        store: str | None = None,
        baseline: dict[str, Any] | None = None,
    ) -> None:
        from ddtune.bench.hardware import hardware_fingerprint
        from ddtune.services import Owner, build_controller
        from ddtune.sweep.spec.parse import Config

        _preload()
        self.name, self.service, self.bench, self.root = name, service, bench, Path(root)
        owner = Owner.current(sweep=sweep, store=store)  # this process starts the instances
        self.controller = build_controller(service, self.root / "slots" / name, owner=owner)
        self.baseline = None if baseline is None else Config.from_wire(baseline, "baseline")
        self.hardware = hardware_fingerprint()
        self._lock = threading.Lock()  # one attempt at a time
        self._phase = "idle"
        self._ready: Outcome | None = None
        self.before = self.controller.seen_before()  # what its restore puts back
        self._notes = self._reclaim()

    def _reclaim(self) -> list[str]:
        """Stop whatever an earlier runner of this slot left running."""
        left = self.controller.our_processes()
        notes = self.controller.close()
        if left:
            pids = ", ".join(str(p.pid) for p in left)
            notes.insert(0, f"slot {self.name}: stopped {len(left)} leftover process(es): {pids}")
        return notes

    def info(self) -> SlotInfo:
        return SlotInfo(self.name, node_address(), os.getpid(), self.hardware, list(self._notes))

    def state(self) -> dict[str, Any]:
        """The phase now and, once READY, the outcome so far (identity, timings)."""
        return {"phase": self._phase, "ready": self._ready}

    def run(self, task: AttemptTask) -> AttemptReport:
        """One attempt; never raises (an unexpected error is the attempt's failure)."""
        from ddtune.sweep.spec.parse import Config

        with self._lock:
            self._ready = None
            try:
                config = Config.from_wire(task.config, f"trial {task.trial_id}")
                report = self._attempt(task, config)
            except Exception as exc:  # a bug must not take the slot down
                detail = f"{type(exc).__name__}: {exc}; {traceback.format_exc(limit=3)}"
                report = AttemptReport.failed("error", detail)
            finally:
                self._phase = "idle"
        report.hardware, report.slot, report.node = self.hardware, self.name, node_address()
        return report

    def _attempt(self, task: AttemptTask, config: Config) -> AttemptReport:
        folder = self.root / task.path
        if task.control:  # the breaker's control start: READY or not, no bench
            return AttemptReport(become_ready(self.controller, config, folder, self._set_phase))
        from ddtune.bench.matrix import BenchMatrix

        bench = self.bench if task.bench is None else BenchMatrix.from_dict(task.bench)
        return execute_attempt(
            self.controller,
            bench,
            self.service.engine,
            config,
            folder,
            self._set_phase,
            on_ready=self._on_ready,
        )

    def _set_phase(self, text: str) -> None:
        self._phase = text

    def _on_ready(self, outcome: Outcome) -> None:
        self._ready = outcome

    def close(self) -> list[str]:
        """The service back as the slot found it (the controller's `restore`): the line that
        says how it was left."""
        self._phase = "closing"
        return [self.controller.restore(self.before, self.baseline)]


def node_address() -> str:
    """This machine's address as Ray names nodes (the local IP), or its host name."""
    try:
        import ray.util

        return str(ray.util.get_node_ip_address())
    except Exception:  # Ray absent or not initialised: the host name says enough
        return socket.gethostname()


__all__ = [
    "AttemptTask",
    "Event",
    "Finished",
    "Lost",
    "Progress",
    "SlotInfo",
    "SlotRunner",
    "node_address",
]
