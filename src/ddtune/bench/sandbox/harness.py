"""Runs one coding task inside the sandbox (docs/bench.md "Sandbox").

Invocation: `python -I -S -B harness.py CONFIG_FD TEST_FD VERDICT_FD`, from
`checker.py`, inside `unshare(1)`'s namespaces when the machine has them (this
process is then PID 1 there). Stdlib only: nothing of ddtune is importable
inside the sandbox.

1. Read the config (CONFIG_FD: the tested program, entry point, limits, uids,
   the filesystem policy). Build the jail (`jail.build_root`) when asked.
2. Fork the **tested process**: it closes every descriptor but stdout, stderr
   and its two channel pipes (so it never holds TEST_FD or VERDICT_FD), drops
   privileges, lowers its rlimits, installs the audit hook (a second line of
   defence only), runs prompt + completion and then answers calls of the
   entry point with plain data (`wire`).
3. This process becomes the **checker**: it drops privileges to a different
   uid (or a nested user namespace) and turns non-dumpable, so the tested
   process can neither trace it nor open its descriptors or memory in /proc.
   Only then it reads the test (TEST_FD), runs prompt + test and calls
   `check(proxy)`: every call of the candidate crosses to the tested process
   and comes back as a value the checker rebuilt itself.
4. The checker writes the verdict on VERDICT_FD, which only it holds.

The tested process never sees the test, the verdict channel or the checker's
memory, so nothing it does in-process can produce `passed`: it can only return
values. Outcomes: passed, assertion, exception:<Type>, timeout (SIGXCPU),
killed, exit_without_check (the tested process ended before `check()` returned).
"""

from __future__ import annotations

import builtins
import json
import os
import resource
import signal
import sys

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs every test run
if TYPE_CHECKING:
    from typing import Any, BinaryIO, NoReturn

    import ddtune.bench.sandbox.jail as jail
    import ddtune.bench.sandbox.wire as wire
else:  # run as a script: load the siblings from this file's folder, then forget it
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import jail
    import wire

    del sys.path[0]

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
OPEN_EVENTS = {"open"}  # audit events whose writes must stay inside the workdir
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
LIMITS = {
    "cpu_s": resource.RLIMIT_CPU,
    "memory_bytes": resource.RLIMIT_AS,
    "nproc": resource.RLIMIT_NPROC,
    "fsize_bytes": resource.RLIMIT_FSIZE,
    "nofile": resource.RLIMIT_NOFILE,
    "core": resource.RLIMIT_CORE,
}
CHANNEL_IN, CHANNEL_OUT = 3, 4  # the tested process's ends of its two pipes
DETAIL_CHARS = 300


class RunnerGone(BaseException):
    """The tested process ended or broke the channel (a BaseException: tests cannot swallow it)."""


def set_limits(limits: dict[str, int | None]) -> None:
    """Lower soft and hard limits (never above the current hard limit)."""
    for key, value in limits.items():
        if value is None:
            continue
        which = LIMITS[key]
        hard = resource.getrlimit(which)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def make_guard(workdir: str) -> Any:  # noqa: C901 (one closure on purpose, see below)
    """An audit hook: deny writes outside `workdir`, sockets and new programs.

    The tested code runs in this process, so the hook reads nothing it could
    rebind later: the functions and event tables are bound here, once, and the
    checks stay inside this one closure instead of module-level helpers.
    """
    realpath, join, isinstance_, str_ = os.path.realpath, os.path.join, isinstance, str
    opens, denied, write_flags = frozenset(OPEN_EVENTS), frozenset(DENIED_EVENTS), WRITE_FLAGS
    path_events = dict(PATH_EVENTS)
    prefix = workdir.rstrip("/") + "/"

    def inside(path: Any) -> bool:
        if isinstance_(path, int):
            return True  # an already-open file descriptor
        if isinstance_(path, bytes):
            path = path.decode(errors="replace")
        full = realpath(join(workdir, str_(path)))
        return full == workdir or full.startswith(prefix)

    def guard(event: str, args: tuple[Any, ...]) -> None:
        if event in opens:
            path, mode, flags = args
            writing = (mode is not None and any(c in str_(mode) for c in "wax+")) or (
                mode is None and isinstance_(flags, int) and flags & write_flags
            )
            if writing and path is not None and not inside(path):
                raise PermissionError(f"sandbox: writing outside the task directory: {path}")
        elif event in path_events:
            for i in path_events[event]:
                if i < len(args) and args[i] is not None and not inside(args[i]):
                    raise PermissionError(f"sandbox: {event} outside the task directory")
        elif event in denied:
            raise PermissionError(f"sandbox: {event} is not allowed")

    return guard


def raised(exc: BaseException) -> dict[str, Any]:
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable>"
    return {"raised": [type(exc).__name__, text[:DETAIL_CHARS]]}


# -- the tested process -------------------------------------------------------


def run_tested_code(config: dict[str, Any], channel_in: int, channel_out: int) -> NoReturn:
    """Become the tested process: isolate, run the program, answer calls; never returns."""
    high_in, high_out = os.dup2(channel_in, 90), os.dup2(channel_out, 91)
    os.dup2(high_in, CHANNEL_IN)
    os.dup2(high_out, CHANNEL_OUT)
    os.closerange(CHANNEL_OUT + 1, max(1024, resource.getrlimit(resource.RLIMIT_NOFILE)[0]))
    os.chdir(config["workdir"])
    jail.drop_privileges(config["runner_uid"], config["nested_userns"])
    if config["jail"] is None:  # no PID namespace: die with the checker at least
        jail.prctl(jail.PR_SET_PDEATHSIG, signal.SIGKILL)
    set_limits(config["runner_limits"])
    sys.addaudithook(make_guard(config["workdir"]))
    me = os.getpid()
    first, function = load_program(config["program"], config["entry_point"])
    del config
    answer(me, first)
    stream = os.fdopen(CHANNEL_IN, "rb")
    while function is not None and (message := wire.receive(stream)) is not None:
        answer(me, call(function, message))
    sys.stdout.flush()
    os._exit(0)


def load_program(source: str, entry_point: str) -> tuple[dict[str, Any], Any]:
    """Run prompt + completion; the first message for the checker and the entry point."""
    namespace = {"__name__": "__sandbox__", "__builtins__": builtins}
    try:
        code = compile(source, "program.py", "exec")
    except (SyntaxError, ValueError) as exc:
        return {"syntax_error": f"{type(exc).__name__}: {exc}"[:DETAIL_CHARS]}, None
    try:
        exec(code, namespace)
        if entry_point not in namespace:
            raise NameError(f"name {entry_point!r} is not defined")
        return {"ready": True}, namespace[entry_point]
    except Exception as exc:
        return raised(exc), None


def call(function: Any, message: dict[str, Any]) -> dict[str, Any]:
    try:
        value = function(*wire.decode(message["args"]), **wire.decode(message["kwargs"]))
        return {"value": wire.encode(value)}
    except Exception as exc:
        return raised(exc)


def answer(me: int, message: dict[str, Any]) -> None:
    """Reply to the checker; a process the tested code forked exits quietly instead."""
    if os.getpid() != me:
        os._exit(0)
    try:
        data = wire.dumps(message)
    except (TypeError, ValueError) as exc:
        data = wire.dumps(raised(exc))
    try:
        wire.write(CHANNEL_OUT, data)
    except OSError:
        os._exit(0)


# -- the checker ----------------------------------------------------------------


class Candidate:
    """Stands in for the entry point in the checker: each call runs in the tested process."""

    def __init__(self, out_fd: int, stream: BinaryIO) -> None:
        self.out_fd, self.stream = out_fd, stream
        self.gone: str | None = None  # why the tested process can no longer answer

    def receive(self) -> dict[str, Any]:
        try:
            message = wire.receive(self.stream)
        except wire.ChannelError as exc:
            self.gone = f"channel: {exc}"
            raise RunnerGone(self.gone) from None
        if message is None:
            self.gone = "ended"
            raise RunnerGone(self.gone)
        return message

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.gone:
            raise RunnerGone(self.gone)
        request = {"args": wire.encode(list(args)), "kwargs": wire.encode(kwargs)}
        try:
            wire.write(self.out_fd, wire.dumps(request))
        except OSError:
            self.gone = "ended"
            raise RunnerGone(self.gone) from None
        reply = self.receive()
        try:
            if "value" in reply:
                return wire.decode(reply["value"])
            exc = remote_exception(reply.get("raised"))
        except wire.ChannelError as broken:  # garbage: never a pass, whatever the test catches
            self.gone = f"channel: {broken}"
            raise RunnerGone(self.gone) from None
        raise exc


def remote_exception(raised_: Any) -> Exception:
    """The tested process's exception, rebuilt here as a builtin class or a plain one of that name."""
    if not (
        isinstance(raised_, list) and len(raised_) == 2 and all(type(x) is str for x in raised_)
    ):
        raise wire.ChannelError("the tested process sent neither a value nor an exception")
    name, message = raised_[0][:100], raised_[1][:DETAIL_CHARS]
    if not name.isidentifier():
        raise wire.ChannelError(f"bad exception name {name!r}")
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:
            pass
    return type(name, (Exception,), {})(message)


def outcome_of(exc: BaseException) -> dict[str, str]:
    detail = raised(exc)["raised"][1]
    if isinstance(exc, AssertionError):
        return {"outcome": "assertion", "detail": detail}
    if isinstance(exc, MemoryError):
        return {"outcome": "killed", "detail": "MemoryError: memory limit reached"}
    return {"outcome": f"exception:{type(exc).__name__}", "detail": detail}


def runner_outcome(candidate: Candidate, pid: int) -> dict[str, str]:
    """How the tested process ended, when it ended (or broke the channel) before check() did."""
    if candidate.gone and candidate.gone.startswith("channel"):
        return {"outcome": "exception:ChannelError", "detail": candidate.gone}
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status))
        if sig == signal.SIGXCPU:
            return {"outcome": "timeout", "detail": "CPU-time limit reached (SIGXCPU)"}
        return {"outcome": "killed", "detail": f"killed by {sig.name}"}
    code = os.WEXITSTATUS(status)
    return {
        "outcome": "exit_without_check",
        "detail": f"exited with code {code} before check() returned",
    }


def judge(
    config: dict[str, Any], test: str, candidate: Candidate, runner_pid: int
) -> dict[str, str]:
    """Run prompt + test and `check(candidate)`; the verdict."""
    entry_point = config["entry_point"]
    if not entry_point.isidentifier():
        return {
            "outcome": "exception:ValueError",
            "detail": f"entry_point is not a name: {entry_point!r}",
        }
    try:
        code = compile(test, "test.py", "exec")
    except (SyntaxError, ValueError) as exc:
        return {"outcome": "syntax_error", "detail": f"{type(exc).__name__}: {exc}"}
    try:
        first = candidate.receive()
        if "syntax_error" in first:
            return {"outcome": "syntax_error", "detail": str(first["syntax_error"])}
        if "ready" not in first:
            try:
                return outcome_of(remote_exception(first.get("raised")))
            except wire.ChannelError as broken:
                return {"outcome": "exception:ChannelError", "detail": str(broken)}
        namespace = {"__name__": "__sandbox__", "__builtins__": builtins}
        exec(code, namespace)
        namespace[entry_point] = candidate
        exec(compile(f"check({entry_point})", "<check>", "exec"), namespace)
        verdict = {"outcome": "passed", "detail": ""}
    except RunnerGone:
        verdict = {}
    except SystemExit as exc:
        verdict = {
            "outcome": "exit_without_check",
            "detail": f"check() called sys.exit({exc.code!r})",
        }
    except Exception as exc:
        verdict = outcome_of(exc)
    return runner_outcome(candidate, runner_pid) if candidate.gone else verdict


def become_checker(
    config: dict[str, Any], test_fd: int, pipes: tuple[int, int], pid: int
) -> dict[str, str]:
    jail.drop_privileges(config["checker_uid"], config["nested_userns"])
    jail.prctl(jail.PR_SET_DUMPABLE, 0)
    set_limits(config["checker_limits"])
    test = read_all(test_fd)
    return judge(config, test, Candidate(pipes[0], os.fdopen(pipes[1], "rb")), pid)


# -- this process -----------------------------------------------------------------


def read_all(fd: int) -> str:
    with os.fdopen(fd, "rb") as f:
        f.seek(0)
        return f.read().decode("utf-8")


def main() -> None:
    config_fd, test_fd, verdict_fd = (int(arg) for arg in sys.argv[1:4])
    config = json.loads(read_all(config_fd))
    signal.signal(signal.SIGALRM, lambda *_: os._exit(71))  # ends the run should ddtune die
    signal.alarm(config["deadline_s"])
    try:
        jail.prctl(jail.PR_SET_DUMPABLE, 0)  # before the fork: no window for the tested code
        jail.new_session_keyring()
        if config["jail"] is not None:
            jail.build_root(config["jail"])
        elif config["runner_uid"] is None:
            jail.prctl(jail.PR_SET_CHILD_SUBREAPER, 1)
    except OSError as exc:
        wire.write(verdict_fd, wire.dumps({"setup_error": str(exc)}))
        sys.exit(70)
    runner_in, checker_out = os.pipe()
    checker_in, runner_out = os.pipe()
    pid = os.fork()
    if pid == 0:
        run_tested_code(config, runner_in, runner_out)
    for fd in (runner_in, runner_out):
        os.close(fd)
    verdict = become_checker(config, test_fd, (checker_out, checker_in), pid)
    if config["jail"] is None and config["runner_uid"] is None:
        jail.kill_descendants()
    wire.write(verdict_fd, wire.dumps(verdict))
    os._exit(0)  # no interpreter teardown: the verdict is out, the PID namespace ends with us


if __name__ == "__main__":
    main()
