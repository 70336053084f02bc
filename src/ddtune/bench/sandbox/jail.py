"""The sandbox's kernel-side walls: filesystem, privileges, leftovers (docs/bench.md "Sandbox").

Loaded by `harness.py` inside fresh mount/pid/net/ipc/uts namespaces (made by
`unshare(1)`), while the harness is still root there. Stdlib only.

`build_root(policy)` makes a new root on a small tmpfs: read-only bind mounts
of the system directories the interpreter needs (`policy["binds"]`, e.g. /usr
and the interpreter's prefix; the same paths as outside), chosen files of /etc,
a few device nodes, a fresh /proc for the PID namespace, and ONE size-limited
tmpfs (`policy["disk_bytes"]`) shared by /task, /tmp, /var/tmp and /dev/shm.
Paths in `policy["hide"]` (ddtune's package, the repo) get an empty mount on
top when they fall inside a bound directory. Then `pivot_root` and a lazy
unmount of the old root: nothing of the host tree is left in the namespace,
so even a process that gains capabilities in a new user namespace cannot
reach it. The new root and /dev are remounted read-only at the end.

`drop_privileges` leaves root for good (after `build_root`, or at once in
the fallback): as real root, `setresuid` to a fresh unprivileged uid (no
capabilities, the kernel's uid checks apply); when the namespaces were made
without root (`unshare --user`), a nested user namespace, which holds no
rights over the mounts above. Both also set no_new_privs.

`new_session_keyring` leaves ddtune's session keyring, which fork and
setuid would otherwise pass on (keyrings are not namespaced).

`kill_descendants` ends every process below a subreaper (the fallback
without a PID namespace, when ddtune is not root).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import signal

TYPE_CHECKING = False  # importing typing would cost every test run
if TYPE_CHECKING:
    from typing import Any

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC = 32, 4096, 16384
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2
CLONE_NEWUSER = 0x10000000
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 4, 36, 38
KEYCTL_JOIN_SESSION_KEYRING = 1
SYSCALLS = {  # machine -> (pivot_root, keyctl); glibc wraps neither
    "x86_64": (155, 250),
    "aarch64": (41, 219),
    "riscv64": (41, 219),
    "ppc64le": (203, 250),
    "s390x": (217, 280),
}
# statvfs flags a bind remount must keep (the kernel refuses to drop locked ones)
KEPT_FLAGS = (
    (os.ST_NOSUID, MS_NOSUID),
    (os.ST_NODEV, MS_NODEV),
    (os.ST_NOEXEC, MS_NOEXEC),
    (os.ST_NOATIME, MS_NOATIME),
    (os.ST_NODIRATIME, MS_NODIRATIME),
    (os.ST_RELATIME, MS_RELATIME),
)
OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")  # mountinfo writes a space as \040
NEW_ROOT = "/tmp"  # where the new root is assembled (a private mount: the host /tmp is untouched)
SCRATCH = {"/task": 0o700, "/tmp": 0o1777, "/var/tmp": 0o1777, "/dev/shm": 0o1777}
DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4


def _check(result: int, what: str) -> None:
    if result < 0:  # libc's -1 with errno set
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    def raw(text: str | None) -> bytes | None:
        return None if text is None else os.fsencode(text)

    _check(
        _libc.mount(raw(source), raw(target), raw(fstype), flags, raw(data or None)),
        f"mount {source or fstype} on {target}",
    )


def prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, value, 0, 0, 0), f"prctl({option})")


def build_root(policy: dict[str, Any]) -> None:
    """Assemble the new root under NEW_ROOT, switch to it and make it read-only."""
    os.umask(0o022)
    _mount("ddtune-root", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    _bind_read_only(policy["binds"], policy["files"], policy["links"])
    for path in policy["hide"]:
        _hide(path)
    _make_dev(policy["devices"])
    _make_scratch(policy["disk_bytes"], policy["task_uid"])
    os.makedirs(NEW_ROOT + "/proc")
    _mount("proc", NEW_ROOT + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _pivot()
    for path in ("/", "/dev"):
        _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _kept_flags(path))


def _bind_read_only(dirs: list[str], files: list[str], links: dict[str, str]) -> None:
    for link, target in links.items():
        os.symlink(target, NEW_ROOT + link)
    for path in dirs + files:
        inside = NEW_ROOT + path
        os.makedirs(os.path.dirname(inside), exist_ok=True)
        if os.path.isdir(path):
            os.makedirs(inside, exist_ok=True)
        else:
            _touch(inside)
        _mount(path, inside, None, MS_BIND | MS_REC)
    for mount_point in _mounts_under([NEW_ROOT + p for p in dirs + files]):
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
        _mount(None, mount_point, None, flags | _kept_flags(mount_point))


def _mounts_under(tops: list[str]) -> list[str]:
    """Mount points at or below any of `tops` (bind mounts bring their submounts along)."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            point = OCTAL_ESCAPE.sub(lambda m: chr(int(m[1], 8)), line.split()[4])
            if any(point == top or point.startswith(top.rstrip("/") + "/") for top in tops):
                found.append(point)
    return found


def _touch(path: str) -> None:
    """An empty file to mount on."""
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def _kept_flags(path: str) -> int:
    flags = os.statvfs(path).f_flag
    return sum(ms for st, ms in KEPT_FLAGS if flags & st)


def _hide(path: str) -> None:
    """An empty read-only mount over `path` (a directory or a file)."""
    inside = NEW_ROOT + path
    if os.path.isdir(inside):
        flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
        _mount("ddtune-hidden", inside, "tmpfs", flags, "size=4k,mode=0")
    elif os.path.exists(inside):
        _mount("/dev/null", inside, None, MS_BIND)


def _make_dev(devices: list[str]) -> None:
    dev = NEW_ROOT + "/dev"
    os.makedirs(dev)
    _mount("ddtune-dev", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=755")
    for node in devices:
        _touch(NEW_ROOT + node)
        _mount(node, NEW_ROOT + node, None, MS_BIND)
    for name, target in DEV_LINKS.items():
        os.symlink(target, f"{dev}/{name}")


def _make_scratch(disk_bytes: int, task_uid: int | None) -> None:
    """One tmpfs, `disk_bytes` in all, seen as /task, /tmp, /var/tmp and /dev/shm."""
    scratch = NEW_ROOT + "/.scratch"
    os.makedirs(scratch)
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    _mount("ddtune-scratch", scratch, "tmpfs", flags, f"size={disk_bytes},mode=755")
    for index, (path, mode) in enumerate(SCRATCH.items()):
        part = f"{scratch}/{index}"
        os.mkdir(part)
        os.chmod(part, mode)
        if path == "/task" and task_uid is not None:
            os.chown(part, task_uid, task_uid)
        os.makedirs(NEW_ROOT + path, exist_ok=True)
        _mount(part, NEW_ROOT + path, None, MS_BIND)
    _check(_libc.umount2(os.fsencode(scratch), MNT_DETACH), "umount scratch")
    os.rmdir(scratch)


def _syscall(index: int, what: str, *args: object) -> None:
    numbers = SYSCALLS.get(os.uname().machine)
    if numbers is None:
        raise OSError(f"{what}: unknown syscall number on {os.uname().machine}")
    _check(_libc.syscall(ctypes.c_long(numbers[index]), *args), what)


def new_session_keyring() -> None:
    """Leave ddtune's session keyring (kernel keyrings ignore namespaces and setuid).

    Where keyctl is refused (ENOSYS, EPERM: a seccomp filter), the tested code
    cannot reach any keyring either; on an unknown machine this is skipped.
    """
    if os.uname().machine not in SYSCALLS:
        return
    try:
        _syscall(1, "keyctl", ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING), None)
    except OSError as exc:
        if exc.errno not in (errno.ENOSYS, errno.EPERM):
            raise


def _pivot() -> None:
    """Make NEW_ROOT the root and detach the old one entirely."""
    os.chdir(NEW_ROOT)
    dot = ctypes.c_char_p(b".")
    _syscall(0, "pivot_root", dot, dot)
    _check(_libc.umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/")


def drop_privileges(uid: int | None, nested_userns: bool) -> None:
    """Become `uid` with no capabilities (real root), or leave for a nested user namespace."""
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    elif nested_userns:
        _check(_libc.unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def kill_descendants() -> None:
    """SIGKILL every process left below this one (a subreaper: orphans come back here)."""
    me = str(os.getpid())
    while True:
        children = [pid for pid, ppid in _processes() if ppid == me]
        for pid in children:
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)
        try:
            while os.waitpid(-1, 0)[0] > 0:
                pass
        except ChildProcessError:
            if not children:
                return


def _processes() -> list[tuple[str, str]]:
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8") as f:
                found.append((name, f.read().rsplit(")", 1)[1].split()[1]))
        except (OSError, IndexError, ValueError):
            continue
    return found
