"""Process facts through psutil: identity, instance membership, port listeners, killing.

A server instance is the set of live (non-zombie) processes that share its
process group, carry its environment tag `DDTUNE_INSTANCE_TAG=<tag>`
(inherited by children, so setsid/double-forked orphans are found too), or
descend from one of those. A process's identity is its PID plus its
`create_time`, which tells a reused PID apart; signals go through psutil,
which refuses a PID that now names another process. Zombies count as gone.
See docs/readiness.md "Services".
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import psutil

TAG_VAR = "DDTUNE_INSTANCE_TAG"
_GONE = (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError, PermissionError)
_DEAD_STATES = (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)

Finder = Callable[[], "list[ProcInfo]"]


@dataclass(frozen=True)
class ProcInfo:
    """One process as psutil saw it; `process` re-checks the identity on every use."""

    pid: int
    ppid: int
    pgid: int
    status: str  # psutil.STATUS_*: running, sleeping, stopped, zombie, ...
    create_time: float  # seconds since the epoch
    process: psutil.Process = field(repr=False, compare=False)

    @property
    def zombie(self) -> bool:
        return self.status in _DEAD_STATES

    def alive(self) -> bool:
        """True while this very process (not a reused PID) runs and is not a zombie."""
        try:
            return self.process.is_running() and self.process.status() not in _DEAD_STATES
        except _GONE:
            return False


class Listener(NamedTuple):
    """One socket listening on a TCP port."""

    address: str  # "ip:port"
    fd: int  # the owner's file descriptor; -1 when the owner cannot be read


def process_info(pid: int) -> ProcInfo | None:
    """The process `pid` (zombies included); None when it is gone or unreadable."""
    try:
        return _info(psutil.Process(pid))
    except _GONE:
        return None


def _info(proc: psutil.Process) -> ProcInfo:
    with proc.oneshot():
        return ProcInfo(
            proc.pid, proc.ppid(), os.getpgid(proc.pid), proc.status(), proc.create_time(), proc
        )


def is_alive(pid: int, create_time: float | None = None) -> bool:
    """True while `pid` exists, is not a zombie and (if given) was created at `create_time`."""
    info = process_info(pid)
    if info is None or info.zombie:
        return False
    return create_time is None or info.create_time == create_time


def read_environ(pid: int) -> dict[str, str]:
    """The environment of `pid`; {} when it is gone or not ours to read."""
    try:
        return dict(psutil.Process(pid).environ())
    except _GONE:
        return {}


def read_cmdline(pid: int) -> list[str]:
    """The argv of `pid`; [] when it is gone or not ours to read."""
    try:
        return list(psutil.Process(pid).cmdline())
    except _GONE:
        return []


def find_instance(
    tag: str | None = None,
    pgids: tuple[int, ...] = (),
    pids: tuple[int, ...] = (),
    tag_prefix: bool = False,
) -> list[ProcInfo]:
    """Live processes in one of `pgids`, listed in `pids`, tagged `tag`, or descended from one.

    `tag_prefix=True` matches every tag that starts with `tag` (all instances
    of one controller). Zombies and this process itself are never returned.
    """
    members: dict[int, ProcInfo] = {}
    me = os.getpid()
    for pid in psutil.pids():
        if pid == me:
            continue
        if pid in pids or _pgid(pid) in pgids or (tag and _has_tag(pid, tag, tag_prefix)):
            info = process_info(pid)
            if info is not None and not info.zombie:
                members[pid] = info
    roots = [info for info in members.values() if info.ppid not in members]
    for root in roots:
        for child in _descendants(root):
            members.setdefault(child.pid, child)
    return list(members.values())


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _descendants(root: ProcInfo) -> Iterator[ProcInfo]:
    """Live descendants of `root` (psutil's children, checked against PID reuse)."""
    try:
        children = root.process.children(recursive=True)
    except _GONE:
        return
    for child in children:
        try:
            info = _info(child)
        except _GONE:
            continue
        if not info.zombie and info.pid != os.getpid():
            yield info


def _has_tag(pid: int, tag: str, prefix: bool) -> bool:
    value = read_environ(pid).get(TAG_VAR)
    if value is None:
        return False
    return value.startswith(tag) if prefix else value == tag


def port_listeners(port: int) -> dict[Listener, int | None]:
    """Sockets listening on TCP `port` (any address, IPv4 and IPv6) -> owning pid or None."""
    found: dict[Listener, int | None] = {}
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            address = f"{conn.laddr.ip}:{conn.laddr.port}"
            found[Listener(address, conn.fd if conn.pid else -1)] = conn.pid
    return found


def signal_processes(procs: list[ProcInfo], sig: int) -> None:
    """Send `sig` to each process that is still the one found (a reused PID is skipped)."""
    for info in procs:
        try:
            info.process.send_signal(sig)
            if sig == signal.SIGTERM:
                info.process.resume()  # SIGCONT: a stopped process must run to see TERM
        except _GONE:
            pass


def wait_gone(find: Finder, timeout: float, poll: float = 0.05) -> list[ProcInfo]:
    """Poll `find()` until it returns nothing or `timeout` passes; return the survivors."""
    deadline = time.monotonic() + timeout
    while True:
        left = find()
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(poll)


def terminate(find: Finder, grace: float, kill_wait: float) -> list[ProcInfo]:
    """SIGTERM (+SIGCONT) everything `find()` returns, wait `grace`, SIGKILL the rest.

    `find` is re-run after each step so processes forked meanwhile are caught, and a
    process once found is waited for until it is gone even when `find` stops seeing it
    (a descendant orphaned by its parent's exit leaves the tree while it still runs).
    Returns the processes still alive after SIGKILL and `kill_wait` seconds.
    """
    members = _found_so_far(find)
    signal_processes(members(), signal.SIGTERM)
    left = wait_gone(members, grace)
    if not left:
        return []
    for _ in range(3):  # a forking process may spawn while we kill
        signal_processes(members(), signal.SIGKILL)
        left = wait_gone(members, kill_wait / 3)
        if not left:
            return []
    return left


def _found_so_far(find: Finder) -> Finder:
    """A finder returning what `find` sees now plus every live process it has seen before."""
    seen: dict[tuple[int, float], ProcInfo] = {}

    def members() -> list[ProcInfo]:
        for info in find():
            seen.setdefault((info.pid, info.create_time), info)
        return [info for info in seen.values() if info.alive()]

    return members


def describe(procs: list[ProcInfo]) -> str:
    """One line naming each process: pid, state and the start of its command line."""
    return ", ".join(
        f"pid {p.pid} ({p.status}) {' '.join(read_cmdline(p.pid))[:80]}" for p in procs
    )


def describe_pid(pid: int | None) -> str:
    """`pid N (command)`, or "an unreadable process" when the owner is unknown."""
    if pid is None:
        return "an unreadable process"
    return f"pid {pid} ({' '.join(read_cmdline(pid))[:80]})"
