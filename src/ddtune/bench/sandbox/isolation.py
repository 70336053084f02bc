"""Which containment this machine gives a sandboxed test, decided once (docs/bench.md "Sandbox").

Two mechanisms:

- `namespaces` (preferred): `unshare(1)` makes mount, PID, network, IPC and UTS
  namespaces (plus a user namespace when ddtune is not root); the harness
  builds a read-only root from `JailPolicy`, with ddtune's files absent.
  Chosen when a probe task passes inside it.
- `none` (fallback): the real filesystem, guarded only by the in-process audit
  hook; every process of the run is killed afterwards (by uid as root, else
  through a subreaper). The notes say so in words: they reach the bench JSON.

Bubblewrap is not used: the same policy is built by the harness itself, so
the machine needs only util-linux's `unshare`.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # src/ddtune or site-packages/ddtune
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")
NAMESPACE_FLAGS = (
    "--mount",
    "--propagation=private",
    "--pid",
    "--net",
    "--ipc",
    "--uts",
    "--fork",
    "--kill-child",
)


@dataclass(frozen=True)
class Plan:
    mechanism: str  # "namespaces" | "none"
    argv_prefix: tuple[str, ...]  # the unshare command, or empty
    python: str
    root: bool  # ddtune runs as root: each run gets fresh unprivileged uids
    jail: dict[str, Any] | None  # the filesystem policy for `jail.build_root`
    notes: tuple[str, ...]


def namespace_plan(unshare: str, root: bool, hide: tuple[str, ...] = ()) -> Plan:
    """The `namespaces` plan (not yet probed); `hide` adds paths to mask."""
    python = os.path.realpath(sys.executable)
    prefix = ("--user", "--map-root-user") if not root else ()
    notes = (
        "mechanism: Linux namespaces made by unshare(1) (mount, PID, network, IPC, UTS"
        + (", user" if not root else "")
        + "); bubblewrap is not used",
        "filesystem: a new read-only root holding only /usr, the interpreter's prefix and a few"
        " /etc files; ddtune's package, its tasks and the repository are not visible;"
        " /task, /tmp, /var/tmp and /dev/shm share one size-limited tmpfs",
        (
            "the tested code runs as a fresh unprivileged uid without capabilities"
            if root
            else "the tested code runs in a nested user namespace without rights over the jail"
        )
        + "; a separate, non-dumpable checker process decides the verdict",
        "no network (empty network namespace); rlimits on CPU, memory, processes, file size"
        " and open files; every process ends with the PID namespace",
    )
    policy = jail_policy(python, hide)
    return Plan("namespaces", (unshare, *prefix, *NAMESPACE_FLAGS), python, root, policy, notes)


def fallback_plan(reason: str) -> Plan:
    """The `none` plan: no namespaces; `reason` says why, in the notes."""
    root = os.geteuid() == 0
    python = (_python_for_others() if root else None) or sys.executable
    who = (
        "the tested code runs as a fresh unprivileged uid; every process of that uid is"
        " killed after each test"
        if root
        else "the tested code runs as the ddtune user: it can write wherever that user can and"
        " tamper with ddtune itself, so no verdict is trustworthy; leftover processes are killed"
        " through a subreaper, which the tested code could kill first"
    )
    notes = (
        f"NO NAMESPACES ({reason}): the tested code sees the real filesystem and network;"
        " writes outside its task directory, sockets and new programs are blocked only by an"
        " in-process audit hook that the tested code can disable; no disk quota;"
        " ddtune's files are readable",
        who,
        "a separate, non-dumpable checker process decides the verdict",
    )
    return Plan("none", (), python, root, None, notes)


def jail_policy(python: str, hide: tuple[str, ...] = ()) -> dict[str, Any]:
    """What the jail shows: read-only binds, symlinks, /etc files, devices, masked paths."""
    links = {d: os.readlink(d) for d in SYSTEM_DIRS if os.path.islink(d)}
    binds = [d for d in SYSTEM_DIRS if os.path.isdir(d) and d not in links]
    for extra in (sys.base_prefix, sys.base_exec_prefix, os.path.dirname(python)):
        real = os.path.realpath(extra)
        if not any(_within(real, b) for b in binds):
            binds.append(real)
    hidden = [str(PACKAGE_DIR)] + ([str(PACKAGE_DIR.parent.parent)] if _in_src() else [])
    hidden += [os.path.realpath(h) for h in hide]
    files = [f for f in ETC_FILES if os.path.exists(f)]
    return {
        "binds": binds,
        "files": files,
        "links": links,
        "devices": [d for d in DEVICES if os.path.exists(d)],
        "hide": [h for h in hidden if any(_within(h, b) for b in binds + files)],
    }


def _in_src() -> bool:
    """ddtune runs from a source checkout (src layout): the repository is its grandparent."""
    return PACKAGE_DIR.parent.name == "src"


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _python_for_others() -> str | None:
    """An interpreter any uid can run: ours if every folder on its path is world-traversable."""
    for candidate in (sys.executable, *SYSTEM_PYTHONS):
        real = Path(os.path.realpath(candidate))
        if real.is_file() and all(os.stat(p).st_mode & stat.S_IXOTH for p in [real, *real.parents]):
            return str(real)
    return None


def find_unshare() -> str | None:
    return shutil.which("unshare")
