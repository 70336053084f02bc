"""The ray backend: one Ray actor per service slot, pinned to its node.

    pool = RayPool(spec, root)
    live, failed = pool.start()   # connect, check every placement, start the actors
    pool.submit("gpu0", task); events = pool.poll(0.5); pool.rejoin(["gpu1"]); pool.close()

Each actor is a `SlotRunner` (the slot's controller and bench), pinned to the node
its placement chose (`NodeAffinitySchedulingStrategy`, not soft), reserving the
slot's custom resources; an actor or node that dies shows as `Lost` on the attempt
it was running. A driver that already called `ray.init` uses that session as it is.
Addresses, the probe, placement and their errors: see docs/sweeps.md "Scale out".
"""

from __future__ import annotations

import importlib
import logging
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddtune.errors import UserError
from ddtune.sweep.run.attempt import AttemptReport
from ddtune.sweep.run.ray.slot import (
    AttemptTask,
    Event,
    Finished,
    Lost,
    Progress,
    SlotInfo,
    SlotRunner,
)
from ddtune.sweep.spec.cluster import Placement, Slot

if TYPE_CHECKING:
    from ddtune.sweep.spec.cluster import ClusterTable
    from ddtune.sweep.spec.parse import SweepSpec

CLOSE_TIMEOUT_S = 120.0  # each actor's controller.close(): the service's stop + quiesce


def import_ray() -> Any:
    """The `ray` module, or one line saying what to install."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise UserError(
            "cluster.backend = 'ray' needs Ray, which is not installed: "
            "pip install 'ddtune[ray]' (or pip install 'ray>=2.60')",
            key="cluster.backend",
        ) from None


class RayPool:
    """The `SlotPool` of `driver.py` on Ray; see the module docstring."""

    def __init__(self, spec: SweepSpec, root: Path, store: str | None = None) -> None:
        self.spec, self.root, self.store = spec, root, store
        self.table: ClusterTable = spec.cluster.table
        self.slots = {slot.name: slot for slot in spec.cluster.slots}
        self.ray: Any = None
        self.owns_session = False
        self.actors: dict[str, Any] = {}
        self.running: dict[Any, str] = {}  # ObjectRef of a run() call → slot
        self.starting: dict[str, tuple[Any, Any, float]] = {}  # slot → (actor, info ref, since)
        self.lost: set[str] = set()  # slots whose actor died during this run

    # --- start ------------------------------------------------------------------------

    def start(self) -> tuple[dict[str, SlotInfo], dict[str, str]]:
        self.ray = import_ray()
        self.owns_session = connect(self.ray, self.table, self.spec.name)
        nodes = place(self.ray, list(self.slots.values()))  # raises before any actor starts
        for name, node in nodes.items():
            self._launch(name, node)
        failed: dict[str, str] = {}
        live = self._await_started(failed)
        for name in list(self.starting):
            failed[name] = self._give_up(name, "did not start")
        return live, failed

    def _launch(self, name: str, node_id: str) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        slot = self.slots[name]
        actor_class = self.ray.remote(SlotRunner).options(
            num_cpus=0,
            max_concurrency=4,  # run() on one thread, state() and close() beside it
            max_restarts=0,
            resources=dict(slot.placement.resources),
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        )
        baseline = None if self.spec.baseline is None else self.spec.baseline.to_wire()
        args = (self.spec.bench, str(self.root), self.spec.name, self.store, baseline)
        actor = actor_class.remote(name, slot.service, *args)  # SlotRunner's arguments
        self.starting[name] = (actor, actor.info.remote(), time.monotonic())

    def _await_started(self, failed: dict[str, str]) -> dict[str, SlotInfo]:
        """The slots starting now, as each comes up (or fails), within `start_timeout`."""
        deadline = time.monotonic() + self.table.start_timeout
        live: dict[str, SlotInfo] = {}
        while self.starting and time.monotonic() < deadline:
            live.update(self._collect_started(failed, timeout=0.5))
        return live

    def _collect_started(self, failed: dict[str, str], timeout: float) -> dict[str, SlotInfo]:
        refs = {ref: name for name, (_, ref, _) in self.starting.items()}
        if not refs:
            return {}
        ready, _ = self.ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
        live = {}
        for ref in ready:
            name = refs[ref]
            actor, _, _ = self.starting.pop(name)
            try:
                live[name] = self.ray.get(ref)
                self.actors[name] = actor
            except Exception as exc:  # the actor's constructor failed, or its node died
                failed[name] = f"its actor failed to start: {_short(exc)}"
                self.ray.kill(actor)
        return live

    def _give_up(self, name: str, why: str) -> str:
        actor, _, _ = self.starting.pop(name)
        self.ray.kill(actor)
        slot = self.slots[name]
        return (
            f"{why} within cluster.start_timeout = {self.table.start_timeout:g} s "
            f"(placement: {slot.placement.describe()}; are its resources taken?)"
        )

    # --- running ------------------------------------------------------------------------

    def submit(self, slot: str, task: AttemptTask) -> None:
        self.running[self.actors[slot].run.remote(task)] = slot

    def poll(self, timeout: float) -> list[Event]:
        events: list[Event] = []
        if self.running:
            done, _ = self.ray.wait(list(self.running), num_returns=1, timeout=timeout)
            for ref in done:
                events.append(self._result(ref, self.running.pop(ref)))
        else:
            time.sleep(timeout)
        events += self._states({s for s in self.running.values()})
        return events

    def _result(self, ref: Any, slot: str) -> Event:
        try:
            return Finished(slot, self.ray.get(ref))
        except self.ray.exceptions.RayTaskError as exc:  # a bug in run(): the attempt failed
            return Finished(slot, AttemptReport.failed("error", _short(exc), slot=slot))
        except Exception as exc:  # RayActorError, WorkerCrashedError, node died, ...
            self.actors.pop(slot, None)
            self.lost.add(slot)
            return Lost(slot, _short(exc))

    def _states(self, busy: set[str]) -> list[Event]:
        refs = {self.actors[s].state.remote(): s for s in busy if s in self.actors}
        if not refs:
            return []
        ready, _ = self.ray.wait(list(refs), num_returns=len(refs), timeout=1.0)
        events: list[Event] = []
        for ref in ready:
            try:
                state = self.ray.get(ref)
            except Exception:  # the death shows on the run() call as well
                continue
            events.append(Progress(refs[ref], state["phase"], state["ready"]))
        return events

    def rejoin(self, retired: list[str]) -> dict[str, SlotInfo]:
        """Slots back after their actor or node died; starts are checked on later calls."""
        failed: dict[str, str] = {}
        live = self._collect_started(failed, timeout=0)
        for name, (_, _, since) in list(self.starting.items()):
            if time.monotonic() - since > self.table.start_timeout:
                self._give_up(name, "did not restart")
        for name in retired:
            if name not in self.starting and name not in live:
                self._relaunch(name)  # where its node is back
        return live

    # --- close --------------------------------------------------------------------------

    def close(self) -> list[str]:
        """Close every controller (stops the services), then the actors, then the session."""
        if self.ray is None:
            return []
        notes = self._reclaim_lost()
        refs = {actor.close.remote(): name for name, actor in self.actors.items()}
        ready, pending = (
            self.ray.wait(list(refs), num_returns=len(refs), timeout=CLOSE_TIMEOUT_S)
            if refs
            else ([], [])
        )
        for ref in ready:
            try:
                notes += [f"slot {refs[ref]}: {n}" for n in self.ray.get(ref)]
            except Exception as exc:
                notes.append(f"slot {refs[ref]}: close failed: {_short(exc)}")
        notes += [f"slot {refs[ref]}: close did not finish" for ref in pending]
        for actor in [*self.actors.values(), *(a for a, _, _ in self.starting.values())]:
            self.ray.kill(actor)
        self.actors.clear()
        self.starting.clear()
        if self.owns_session:
            self.ray.shutdown()
        return notes

    def _reclaim_lost(self) -> list[str]:
        """Start lost slots once more whose node is alive: a new actor stops what the dead
        one left running (`SlotRunner` reclaims at start), then closes with the rest."""
        for name in self.slots:
            if name in self.lost and name not in self.actors and name not in self.starting:
                self._relaunch(name)  # where its node is gone, so are its services
        return [note for info in self._await_started({}).values() for note in info.notes]

    def _relaunch(self, name: str) -> None:
        """A new actor for slot `name` where a node can take it (none: it stays down)."""
        try:
            node = place(self.ray, [self.slots[name]])[name]
        except UserError:
            return
        self._launch(name, node)


def connect(ray: Any, table: ClusterTable, name: str) -> bool:
    """Join (or start) the Ray cluster of `table.address`; True when this call started it."""
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.WARNING,
        "namespace": f"ddtune-{name}",
    }
    address = table.address
    if address == "local":
        local = table.local
        if local is not None:
            options.update(num_cpus=local.num_cpus, resources=local.resources or None)
            options.update(labels=local.labels or None)
    else:
        address = _resolve(address)
        _probe(address, table.start_timeout)
    try:  # in this (the main) thread: Ray ties the processes it starts to the thread that
        # started them, so a helper thread would take the cluster with it
        ray.init(address=address, **options)
    except Exception as exc:
        raise UserError(
            f"cluster.address: could not join Ray at {address!r}: {_short(exc)}",
            key="cluster.address",
        ) from None
    return True


def _resolve(address: str) -> str:
    if address != "auto":
        return address
    try:
        # Ray has no public call that resolves "auto" without connecting, and a
        # connect to nothing would hang instead of failing with the line below.
        from ray._private.services import canonicalize_bootstrap_address  # noqa: PLC2701

        found = canonicalize_bootstrap_address("auto")
    except Exception:  # nothing recorded, or another Ray layout
        found = None
    if not found:
        raise UserError(
            "cluster.address = 'auto': no Ray cluster runs on this machine; start one "
            "(ray start --head) or set cluster.address = 'local' or 'host:port'",
            key="cluster.address",
        )
    return str(found)


def _probe(address: str, timeout: float) -> None:
    """A TCP connection to the cluster's port, so a dead address fails fast."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=min(timeout, 10.0)).close()
    except OSError as exc:
        raise UserError(
            f"cluster.address: the Ray cluster at {address} does not answer ({exc}); "
            "start it (ray start --head) or fix the address",
            key="cluster.address",
        ) from None


def place(ray: Any, slots: list[Slot]) -> dict[str, str]:
    """Slot name → the id of the live node it runs on; UserError naming a slot that fits none."""
    nodes = sorted(
        (n for n in ray.nodes() if n.get("Alive")), key=lambda n: n["NodeManagerAddress"]
    )
    here = ray.get_runtime_context().get_node_id()
    used: dict[str, int] = {}
    chosen: dict[str, str] = {}
    for slot in slots:
        fits = [n["NodeID"] for n in nodes if _fits(n, slot.placement, here)]
        if not fits:
            seen = "; ".join(_describe_node(n) for n in nodes) or "none"
            raise UserError(
                f"{slot.key}.placement: no live Ray node satisfies slot {slot.name!r} "
                f"({slot.placement.describe()}); nodes: {seen}",
                key=f"{slot.key}.placement",
            )
        node = min(fits, key=lambda n: used.get(n, 0))  # spread slots with the same placement
        used[node] = used.get(node, 0) + 1
        chosen[slot.name] = node
    return chosen


def _fits(node: dict[str, Any], placement: Placement, here: str) -> bool:
    if placement == Placement():
        return bool(node["NodeID"] == here)
    labels = node.get("Labels") or {}
    resources = node.get("Resources") or {}
    return (
        (placement.node_ip is None or node["NodeManagerAddress"] == placement.node_ip)
        and all(labels.get(k) == v for k, v in placement.labels.items())
        and all(resources.get(k, 0) >= v for k, v in placement.resources.items())
    )


def _describe_node(node: dict[str, Any]) -> str:
    labels = {k: v for k, v in (node.get("Labels") or {}).items() if not k.startswith("ray.io/")}
    builtin = ("CPU", "GPU", "memory", "object_store_memory")
    custom = sorted(k for k in node.get("Resources") or {} if k not in builtin and ":" not in k)
    return f"{node['NodeManagerAddress']} labels {labels} resources {custom}"


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


__all__ = ["RayPool", "connect", "import_ray", "place"]
