"""Process facts read from /proc: identity, instance membership, port listeners, killing.

A server instance is the set of live (non-zombie) processes that either share
its process group or carry its environment tag `DDTUNE_INSTANCE_TAG=<tag>`
(inherited by children, so setsid/double-forked orphans are found too).
A process's identity is its PID plus its start time (clock ticks since boot,
field 22 of /proc/<pid>/stat), which tells a reused PID apart.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

TAG_VAR = "DDTUNE_INSTANCE_TAG"
PROC = Path("/proc")
_LISTEN_STATE = "0A"


@dataclass(frozen=True)
class ProcInfo:
    """One process as /proc/<pid>/stat describes it."""

    pid: int
    ppid: int
    pgid: int
    state: str  # R S D Z T ...
    start_ticks: int  # clock ticks after boot

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


def read_stat(pid: int) -> ProcInfo | None:
    """Parse /proc/<pid>/stat; None when the process is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm (field 2) may contain spaces and parentheses: split after the last ')'
    rest = text[text.rindex(")") + 2 :].split()
    return ProcInfo(pid, int(rest[1]), int(rest[2]), rest[0], int(rest[19]))


def start_time_epoch(start_ticks: int) -> float:
    """Convert a /proc start time in clock ticks to Unix seconds."""
    btime = 0.0
    for line in (PROC / "stat").read_text().splitlines():
        if line.startswith("btime "):
            btime = float(line.split()[1])
    return btime + start_ticks / os.sysconf("SC_CLK_TCK")


def is_alive(pid: int, start_ticks: int | None = None) -> bool:
    """True while `pid` exists, is not a zombie and (if given) has this start time."""
    info = read_stat(pid)
    if info is None or info.zombie:
        return False
    return start_ticks is None or info.start_ticks == start_ticks


def read_environ(pid: int) -> dict[str, str]:
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def read_cmdline(pid: int) -> list[str]:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0")[:-1]]


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir(PROC) if name.isdigit()]


def find_instance(
    tag: str | None = None,
    pgids: tuple[int, ...] = (),
    pids: tuple[int, ...] = (),
    tag_prefix: bool = False,
) -> list[ProcInfo]:
    """Live processes in one of `pgids`, listed in `pids`, or whose tag matches `tag`.

    `tag_prefix=True` matches every tag that starts with `tag` (all instances
    of one controller). Zombies and this process itself are never returned.
    """
    found = []
    for pid in all_pids():
        if pid == os.getpid():
            continue
        info = read_stat(pid)
        if info is None or info.zombie:
            continue
        if info.pgid in pgids or pid in pids or (tag and _has_tag(pid, tag, tag_prefix)):
            found.append(info)
    return found


def _has_tag(pid: int, tag: str, prefix: bool) -> bool:
    value = read_environ(pid).get(TAG_VAR)
    if value is None:
        return False
    return value.startswith(tag) if prefix else value == tag


def listener_inodes(port: int) -> set[int]:
    """Socket inodes listening on TCP `port` (any address, IPv4 and IPv6)."""
    inodes = set()
    for name in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            local, state, inode = cols[1], cols[3], int(cols[9])
            if state == _LISTEN_STATE and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(inode)
    return inodes


def socket_owners(inodes: set[int]) -> dict[int, int]:
    """Map socket inode -> a pid holding it (scans /proc/*/fd; unreadable pids are skipped)."""
    owners: dict[int, int] = {}
    if not inodes:
        return owners
    for pid in all_pids():
        try:
            fds = os.listdir(PROC / str(pid) / "fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(PROC / str(pid) / "fd" / fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inode = int(target[8:-1])
                if inode in inodes:
                    owners.setdefault(inode, pid)
    return owners


def port_listeners(port: int) -> dict[int, int | None]:
    """Listening socket inode -> owning pid (None when the owner cannot be read)."""
    inodes = listener_inodes(port)
    owners = socket_owners(inodes)
    return {inode: owners.get(inode) for inode in inodes}


def signal_processes(procs: list[ProcInfo], sig: int) -> None:
    """Send `sig` to each process whose PID still has the same start time."""
    for info in procs:
        if not is_alive(info.pid, info.start_ticks):
            continue
        try:
            os.kill(info.pid, sig)
            if sig == signal.SIGTERM:
                os.kill(info.pid, signal.SIGCONT)  # a stopped process must run to see TERM
        except (ProcessLookupError, PermissionError):
            pass


def wait_gone(find, timeout: float, poll: float = 0.05) -> list[ProcInfo]:
    """Poll `find()` until it returns nothing or `timeout` passes; return the survivors."""
    deadline = time.monotonic() + timeout
    while True:
        left = find()
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(poll)


def terminate(find, grace: float, kill_wait: float) -> list[ProcInfo]:
    """SIGTERM (+SIGCONT) everything `find()` returns, wait `grace`, SIGKILL the rest.

    `find` is re-run after each step so processes forked meanwhile are caught.
    Returns the processes still alive after SIGKILL and `kill_wait` seconds.
    """
    signal_processes(find(), signal.SIGTERM)
    left = wait_gone(find, grace)
    if not left:
        return []
    for _ in range(3):  # a forking process may spawn while we kill
        signal_processes(find(), signal.SIGKILL)
        left = wait_gone(find, kill_wait / 3)
        if not left:
            return []
    return left


def describe(procs: list[ProcInfo]) -> str:
    return ", ".join(f"pid {p.pid} ({p.state}) {' '.join(read_cmdline(p.pid))[:80]}" for p in procs)
