"""Whose process holds a port, and what ddtune may do with instances a dead runner left.

Every instance a controller starts carries, next to `DDTUNE_INSTANCE_TAG`, who
started it (`Owner.env`, set by `Controller.instance_env`):

    DDTUNE_INSTANCE_OWNER    "<pid> <create_time>" of the ddtune process that started it
    DDTUNE_INSTANCE_SWEEP    the sweep's name       (when a sweep runner started it)
    DDTUNE_INSTANCE_STORE    the sweep's store path (idem)
    DDTUNE_INSTANCE_WORKDIR  the controller's workdir

A process listening on the service's port is one `Holder`, of one kind:

    ours      an instance of this controller: it is being stopped, wait for it
    leftover  ddtune-tagged, its owner is gone: reclaimable (`[service] reclaim_leftovers`,
              `ddtune sweep cleanup`)
    running   ddtune-tagged, its owner still runs (another live sweep): never killed
    unknown   ddtune-tagged without an owner (an older ddtune): never killed here
    foreign   no tag, or a process we cannot read (another user's): never killed

`PortWatch` is what the readiness protocol asks while it waits for a port: it
reclaims leftovers when allowed and ends the wait early (`port_in_use`, with
the holders named) when only holders that will not go away remain.
See docs/readiness.md "Services".
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

import psutil

import ddtune.services.procs as procs
from ddtune.services.outcome import PhaseFailure

OWNER_VAR = "DDTUNE_INSTANCE_OWNER"
SWEEP_VAR = "DDTUNE_INSTANCE_SWEEP"
STORE_VAR = "DDTUNE_INSTANCE_STORE"
WORKDIR_VAR = "DDTUNE_INSTANCE_WORKDIR"
FAIL_FAST_S = 2.0  # holders that will not go away, seen this long: stop waiting
HolderKind = Literal["ours", "leftover", "running", "unknown", "foreign"]
FOREVER: tuple[HolderKind, ...] = ("running", "unknown", "foreign")  # never killed by ddtune


@dataclass(frozen=True)
class Owner:
    """The ddtune process that starts instances (PID + start time), and its sweep and store."""

    pid: int
    started: float
    sweep: str | None = None
    store: str | None = None

    @classmethod
    def current(cls, sweep: str | None = None, store: str | None = None) -> Owner:
        """This process as the owner of what its controllers start."""
        me = procs.process_info(os.getpid())
        return cls(os.getpid(), me.create_time if me else 0.0, sweep, store)

    def env(self) -> dict[str, str]:
        env = {OWNER_VAR: f"{self.pid} {self.started!r}"}
        if self.sweep is not None:
            env[SWEEP_VAR] = self.sweep
        if self.store is not None:
            env[STORE_VAR] = self.store
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Owner | None:
        """The owner named by an instance's environment; None without (or with a bad) owner."""
        try:
            pid, started = env[OWNER_VAR].split()
            return cls(int(pid), float(started), env.get(SWEEP_VAR), env.get(STORE_VAR))
        except (KeyError, ValueError):
            return None

    def alive(self) -> bool:
        return procs.is_alive(self.pid, self.started)

    def name(self) -> str:
        """`sweep 'demo' (store runs/demo/store.sqlite)`, or the owner's pid for a bare controller."""
        if self.sweep is None:
            return f"a ddtune controller (pid {self.pid})"
        return f"sweep {self.sweep!r} (store {self.store})"


@dataclass(frozen=True)
class Holder:
    """A process listening on the port: who it is and what ddtune may do about it."""

    pid: int | None
    kind: HolderKind
    name: str = ""  # psutil's process name
    cmdline: str = ""
    user: str = ""
    started: float | None = None  # create_time, seconds since the epoch
    tag: str | None = None
    owner: Owner | None = None
    workdir: str | None = None

    def describe(self) -> str:
        """One line naming the process and its owner, for failure details and notes."""
        if self.pid is None:
            return "a process ddtune cannot inspect (another user's; its pid is not visible)"
        who = f"pid {self.pid} ({self.name}: {self.cmdline[:100]}), started {_when(self.started)}"
        if self.kind == "foreign":
            return f"{who}, user {self.user}: not a ddtune process"
        owner = self.owner
        if self.kind == "leftover" and owner is not None:
            return (
                f"ddtune server {who}, left by {owner.name()}, whose runner pid {owner.pid} is gone"
            )
        if self.kind == "running" and owner is not None:
            return f"ddtune server {who} of {owner.name()}, whose runner pid {owner.pid} is running"
        where = f", workdir {self.workdir}" if self.workdir else ""
        return f"ddtune server {who} (tag {self.tag}{where}), owner unknown"

    def advice(self) -> str:
        """What the user can do about it."""
        if self.kind == "leftover":
            store = f" --store {self.owner.store}" if self.owner and self.owner.store else ""
            return f"reclaim it with `ddtune sweep cleanup{store}` or [service] reclaim_leftovers = true"
        if self.kind == "running":
            return "wait for that sweep, stop it, or give this sweep another service.port"
        return "stop it yourself or give this sweep another service.port (ddtune never kills it)"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def holder(pid: int | None, ours: set[int]) -> Holder:
    """Classify the process `pid` that listens on a port (None: its owner is not visible)."""
    if pid is None:
        return Holder(None, "foreign")
    if pid in ours:
        return Holder(pid, "ours")
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            name, argv = proc.name(), " ".join(proc.cmdline())
            user, started = proc.username(), proc.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return Holder(pid, "foreign")
    env = procs.read_environ(pid)
    tag = env.get(procs.TAG_VAR)
    if tag is None:
        return Holder(pid, "foreign", name, argv, user, started)
    owner = Owner.from_env(env)
    kind: HolderKind = "unknown" if owner is None else "running" if owner.alive() else "leftover"
    return Holder(pid, kind, name, argv, user, started, tag, owner, env.get(WORKDIR_VAR))


def port_holders(port: int, ours: set[int]) -> list[Holder]:
    """Every process listening on TCP `port`, classified (one entry per process)."""
    pids = dict.fromkeys(procs.port_listeners(port).values())
    return [holder(pid, ours) for pid in pids]


def tagged_instances(prefix: str = "ddtune-") -> dict[str, Holder]:
    """Each live ddtune instance of this user whose tag starts with `prefix`: tag -> its
    oldest process, classified (leftover, running or unknown). For `ddtune sweep cleanup`."""
    me, uid = os.getpid(), os.getuid()
    found: dict[str, tuple[float, int]] = {}
    for proc in psutil.process_iter(["uids", "environ", "create_time", "status"], ad_value=None):
        info = proc.info
        if proc.pid == me or info["uids"] is None or info["uids"].real != uid:
            continue
        tag = (info["environ"] or {}).get(procs.TAG_VAR)
        if tag and tag.startswith(prefix) and info["status"] != psutil.STATUS_ZOMBIE:
            found[tag] = min(
                found.get(tag, (info["create_time"] or 0.0, proc.pid)),
                (info["create_time"] or 0.0, proc.pid),
            )
    return {tag: holder(pid, set()) for tag, (_, pid) in sorted(found.items())}


def reclaim(tag: str, grace: float, kill_wait: float) -> list[procs.ProcInfo]:
    """Stop every process of the instance tagged `tag`; returns the survivors."""
    return procs.terminate(lambda: procs.find_instance(tag=tag), grace, kill_wait)


@dataclass
class PortWatch:
    """Asked on each poll while waiting for a port: reclaims leftovers, fails fast when hopeless.

    `ours()` lists the PIDs of this controller's instances. `reclaim` allows
    stopping leftovers; `foreign_final` says an untagged holder cannot be one
    of ours in disguise (False for hooks, whose servers may be anyone's).
    """

    port: int
    ours: Callable[[], set[int]]
    reclaim: bool = False
    foreign_final: bool = True
    grace: float = 10.0
    kill_wait: float = 10.0
    reclaimed: list[str] = field(default_factory=list)  # Holder.describe() of each one stopped
    notes: list[str] = field(default_factory=list)
    _hopeless_since: float | None = None

    def check(self) -> list[Holder]:
        """The holders other than ours, after reclaiming what may be; raises when hopeless."""
        holders = self._others()
        if self.reclaim and any(h.kind == "leftover" for h in holders):
            for h in holders:
                if h.kind == "leftover" and h.tag is not None:
                    self.reclaim_one(h)
            holders = self._others()
        stuck = [h for h in holders if self._final(h)]
        if not holders or len(stuck) < len(holders):
            self._hopeless_since = None
            return holders
        now = time.monotonic()
        self._hopeless_since = self._hopeless_since or now
        if now - self._hopeless_since >= FAIL_FAST_S:
            raise self.failure(stuck)
        return holders

    def _others(self) -> list[Holder]:
        return [h for h in port_holders(self.port, self.ours()) if h.kind != "ours"]

    def _final(self, h: Holder) -> bool:
        if h.kind == "leftover":
            return not self.reclaim
        return h.kind in FOREVER and (h.kind != "foreign" or self.foreign_final)

    def reclaim_one(self, h: Holder) -> None:
        assert h.tag is not None
        left = reclaim(h.tag, self.grace, self.kill_wait)
        self.reclaimed.append(h.describe())
        if left:
            self.notes.append(f"could not stop the leftover: {procs.describe(left)}")

    def failure(self, holders: list[Holder]) -> PhaseFailure:
        """port_in_use naming each holder and what to do; carries the holders for the runner."""
        named = "; ".join(f"{h.describe()} — {h.advice()}" for h in holders)
        detail = f"port {self.port} is held by {named}"
        return PhaseFailure("port_in_use", detail, holders=[h.to_dict() for h in holders])


def _when(created: float | None) -> str:
    if created is None:
        return "at an unknown time"
    return datetime.fromtimestamp(created).isoformat(sep=" ", timespec="seconds")
