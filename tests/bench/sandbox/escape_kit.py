"""Host-side bait and checks for the sandbox escape suites (test_sandbox_escapes/forgery).

`Host` sets up things a tested program must not reach: a world-writable UNIX
socket on disk, an abstract UNIX socket, a TCP listener on loopback, a SysV
shared-memory segment (mode 0666), a world-readable file in /dev/shm, a
process running as `nobody` and a key in the session keyring. `Host.escapes()` lists every trace an escape
would leave: new files carrying the marker in /tmp, /var/tmp, /dev/shm,
connections, a changed segment, a dead `nobody` process, a marked process
still running.

`Escape` is one case: a body for `def f():` that runs after the audit hook
is cleared (`CLEAR_HOOK`) and a test for the checker. Bodies may use
placeholders `@M@` (marker), `@SOCK@`, `@ABSTRACT@`, `@PORT@`, `@SHM_KEY@`,
`@SECRET_FILE@`, `@TASKS_FILE@`, `@REPO@`, `@SLEEP@` (a `sleep` argument), `@KEYCTL@` (its syscall number).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from ddtune.assets import TASKS_FILE

IPC_CREAT, IPC_RMID = 0o1000, 0
KEY_SYSCALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}  # add_key, keyctl
KEYCTL_INVALIDATE = 21
NOBODY = 65534
REPO = Path(__file__).resolve().parents[3]
TRACE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/usr", "/etc", REPO, Path(sys.base_prefix) / "lib")
PRELUDE = r"""import os, sys


def _clear_audit_hook():
    # empty the harness's tables, then make every hook function named `guard` a no-op
    main = sys.modules['__main__']
    for name in ('DENIED_EVENTS', 'PATH_EVENTS', 'OPEN_EVENTS'):
        getattr(main, name, set()).clear()
    import gc
    for hook in [o for o in gc.get_objects() if getattr(o, '__qualname__', '').endswith('.guard')]:
        cells = [f'c{i}' for i in range(len(hook.__code__.co_freevars))]
        src = 'def outer():\n' + ''.join(f'    {c} = 0\n' for c in cells)
        src += '    def guard(*args):\n        (None, ' + ', '.join(cells) + ')\n    return guard\n'
        scope = {}
        exec(src, scope)
        hook.__code__ = scope['outer']().__code__


"""
CLEAR_HOOK = "    _clear_audit_hook()\n"  # the first line of every case: the walls under test are the kernel's
IMPORTS = "    import ctypes, socket, subprocess\n"


@dataclass(frozen=True)
class Escape:
    name: str
    body: str  # the body of `def f():`, after CLEAR_HOOK
    test: str = "def check(candidate):\n    got = candidate()\n    assert got == 'done', got\n"
    passes: bool = True  # True: the attempt ran to its end in the sandbox and check() passes

    def program(self, host: Host) -> str:
        return PRELUDE + "def f():\n" + CLEAR_HOOK + IMPORTS + host.fill(self.body) + "\n"

    def test_source(self, host: Host) -> str:
        return "import os, sys\n\n" + host.fill(self.test)

    def combined(self, host: Host) -> str:
        """Program and test as one source (the pre-#14 sandbox ran them in one process)."""
        return self.program(host) + "\n\n" + self.test_source(host)


class _Listener:
    """Accepts connections on a listening socket in a thread and counts them."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.count = sock, 0
        sock.listen(8)
        sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.count += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


class Host:
    """The bait outside the sandbox, and the traces an escape would leave."""

    def __init__(self) -> None:
        self.marker = f"ddtune-esc-{os.getpid()}-{secrets.token_hex(4)}"
        self.sock_path = f"/tmp/{self.marker}.sock"
        self.secret_file = Path(f"/dev/shm/{self.marker}-secret")
        self.shm_key = secrets.randbelow(1 << 30) + 1
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Host:
        unix = socket.socket(socket.AF_UNIX)
        unix.bind(self.sock_path)
        os.chmod(self.sock_path, 0o777)
        abstract = socket.socket(socket.AF_UNIX)
        abstract.bind("\0" + self.marker)
        tcp = socket.socket()
        tcp.bind(("127.0.0.1", 0))
        self.port = tcp.getsockname()[1]
        self.listeners = [_Listener(s) for s in (unix, abstract, tcp)]
        self._stack.callback(lambda: [listener.close() for listener in self.listeners])
        self.secret_file.write_text("host secret\n")
        self.secret_file.chmod(0o644)
        self.nobody = subprocess.Popen(["sleep", "600"], user=NOBODY, group=NOBODY)
        self._stack.callback(self._cleanup)
        self._shm_create()
        self._add_session_key()
        return self

    def reset(self) -> None:
        """Forget earlier runs: counters, shared memory, files, a fresh `nobody` process."""
        for listener in self.listeners:
            listener.count = 0
        ctypes.memset(self.shm_addr, 0, 4096)
        for path in self.traces():
            path.unlink()
        for pid, _ in self.marked_processes():
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)
        if self.nobody.poll() is not None:
            self.nobody = subprocess.Popen(["sleep", "600"], user=NOBODY, group=NOBODY)

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _cleanup(self) -> None:
        self.nobody.kill()
        self.nobody.wait()
        for path in self.traces() + [Path(self.sock_path), self.secret_file]:
            with contextlib.suppress(OSError):
                path.unlink()

    def _add_session_key(self) -> None:
        """A key in this process's session keyring, which every child inherits."""
        libc = ctypes.CDLL(None, use_errno=True)
        add_key, keyctl = KEY_SYSCALLS[os.uname().machine]
        secret = b"host keyring secret"
        key = libc.syscall(add_key, b"user", self.marker.encode(), secret, len(secret), -3)
        assert key > 0, os.strerror(ctypes.get_errno())
        self._stack.callback(lambda: libc.syscall(keyctl, KEYCTL_INVALIDATE, key))

    def _shm_create(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        self.shm_id = libc.shmget(self.shm_key, 4096, IPC_CREAT | 0o666)
        assert self.shm_id >= 0, os.strerror(ctypes.get_errno())
        self.shm_addr = libc.shmat(self.shm_id, None, 0)
        ctypes.memset(self.shm_addr, 0, 4096)
        self._stack.callback(lambda: libc.shmctl(self.shm_id, IPC_RMID, None))
        self._stack.callback(lambda: libc.shmdt(ctypes.c_void_p(self.shm_addr)))

    def fill(self, text: str) -> str:
        values = {
            "@M@": self.marker,
            "@SOCK@": self.sock_path,
            "@ABSTRACT@": self.marker,
            "@PORT@": str(self.port),
            "@SHM_KEY@": str(self.shm_key),
            "@SECRET_FILE@": str(self.secret_file),
            "@TASKS_FILE@": str(TASKS_FILE),
            "@REPO@": str(REPO),
            "@SLEEP@": self.sleep_marker,
            "@KEYCTL@": str(KEY_SYSCALLS[os.uname().machine][1]),
        }
        for key, value in values.items():
            text = text.replace(key, value)
        return text

    def traces(self) -> list[Path]:
        """Files carrying the marker that an escape created on the host."""
        bait = {Path(self.sock_path), self.secret_file}
        found = [p for d in TRACE_DIRS for p in Path(d).glob(self.marker + "*")]
        return [p for p in found if p not in bait]

    def escapes(self) -> list[str]:
        """Every trace of an escape on the host (empty: contained)."""
        out = [f"file {p}" for p in self.traces()]
        out += [f"{n} connection(s) to {kind}" for kind, n in self._connections() if n]
        if ctypes.string_at(self.shm_addr, 1) != b"\0":
            out.append("the host's SysV shared memory was written")
        if self.nobody.poll() is not None:
            out.append("a host process of nobody was killed")
        out += [f"process {pid} still running: {cmd}" for pid, cmd in self.marked_processes()]
        return out

    def _connections(self) -> list[tuple[str, int]]:
        kinds = ("the UNIX socket on disk", "the abstract UNIX socket", "TCP 127.0.0.1")
        return [(k, listener.count) for k, listener in zip(kinds, self.listeners, strict=True)]

    def marked_processes(self) -> list[tuple[str, str]]:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError):
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                if self.marker in cmd or self.sleep_marker in cmd:
                    found.append((pid, cmd))
        return found

    @property
    def sleep_marker(self) -> str:
        """A `sleep` argument unique to this host (processes left behind carry it)."""
        return f"600.{int(self.marker.rsplit('-', 1)[1], 16)}"
