"""Runs one coding task inside the sandbox; copied into the task's temp dir and executed there.

Invocation: `python -I -B harness.py` with one JSON line on stdin:
`{"nonce", "entry_point", "limits": {"cpu_s", "memory_bytes", "nproc", "fsize_bytes", "nofile"}}`.

Steps: read the config, lower the resource limits (they cannot be raised again),
install an audit hook that denies writes outside the working directory, network
access and spawning other programs, compile `program.py` (prompt + completion +
test), execute it, call `check(<entry_point>)`, and only then print
`<nonce> <outcome>` on stdout. Code that exits early (`sys.exit(0)`,
`os._exit(0)`) never reaches that line, so it can never count as a pass.

Stdlib only: the interpreter may be a system Python without ddtune installed.
"""

import json
import os
import resource
import sys

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
PATH_EVENTS = {  # audit event -> indexes of path arguments that must stay inside the workdir
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.rename": (0, 1),
    "os.link": (0, 1),
    "os.symlink": (1,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.truncate": (0,),
    "os.utime": (0,),
    "shutil.rmtree": (0,),
}
DENIED_EVENTS = {
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.getaddrinfo",
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "ctypes.dlopen",
    "ctypes.cdata",
    "os.kill",
    "os.killpg",
}


def set_limits(limits):
    """Lower the hard and soft limits for this process and everything it starts."""
    pairs = [
        (resource.RLIMIT_CPU, limits["cpu_s"]),
        (resource.RLIMIT_AS, limits["memory_bytes"]),
        (resource.RLIMIT_NPROC, limits["nproc"]),
        (resource.RLIMIT_FSIZE, limits["fsize_bytes"]),
        (resource.RLIMIT_NOFILE, limits["nofile"]),
        (resource.RLIMIT_CORE, 0),
    ]
    for which, value in pairs:
        resource.setrlimit(which, (value, value))


def make_guard(workdir):
    """An audit hook: deny writes outside `workdir`, sockets and new programs."""
    realpath, join, isinstance_, str_ = os.path.realpath, os.path.join, isinstance, str
    prefix = workdir.rstrip("/") + "/"

    def inside(path):
        if isinstance_(path, int):
            return True  # an already-open file descriptor
        if isinstance_(path, bytes):
            path = path.decode(errors="replace")
        full = realpath(join(workdir, str_(path)))
        return full == workdir or full.startswith(prefix)

    def guard(event, args):
        if event == "open":
            path, mode, flags = args
            writing = (mode is not None and any(c in str_(mode) for c in "wax+")) or (
                mode is None and isinstance_(flags, int) and flags & WRITE_FLAGS
            )
            if writing and path is not None and not inside(path):
                raise PermissionError(f"sandbox: writing outside the task directory: {path}")
        elif event in PATH_EVENTS:
            for i in PATH_EVENTS[event]:
                if i < len(args) and args[i] is not None and not inside(args[i]):
                    raise PermissionError(f"sandbox: {event} outside the task directory")
        elif event in DENIED_EVENTS:
            raise PermissionError(f"sandbox: {event} is not allowed")

    return guard


def main():
    config = json.loads(sys.stdin.readline())
    nonce, main_pid = config["nonce"], os.getpid()
    entry_point = config["entry_point"]

    def report(outcome, detail=""):
        if os.getpid() != main_pid:
            os._exit(0)  # a forked child of the task: only the main process reports
        sys.stdout.flush()
        os.write(1, f"\n{nonce} {outcome} {detail[:300]!r}\n".encode())

    set_limits(config["limits"])
    workdir = os.path.realpath(os.getcwd())
    with open("program.py", encoding="utf-8") as f:
        source = f.read()
    sys.addaudithook(make_guard(workdir))
    try:
        code = compile(source, "program.py", "exec")
    except (SyntaxError, ValueError) as exc:
        return report("syntax_error", f"{type(exc).__name__}: {exc}")
    if not entry_point.isidentifier():
        return report("exception:ValueError", f"entry_point is not a name: {entry_point!r}")
    namespace = {"__name__": "__sandbox__", "__builtins__": __builtins__}
    del config, source
    try:
        exec(code, namespace)
        exec(compile(f"check({entry_point})", "<check>", "exec"), namespace)
    except AssertionError as exc:
        return report("assertion", str(exc))
    except MemoryError:
        return report("killed", "MemoryError: memory limit reached")
    except RecursionError as exc:
        return report("exception:RecursionError", str(exc))
    except Exception as exc:
        return report(f"exception:{type(exc).__name__}", str(exc))
    report("passed")


if __name__ == "__main__":
    main()
