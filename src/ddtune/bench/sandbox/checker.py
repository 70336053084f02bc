"""Run untrusted generated code against a trusted test, contained (docs/bench.md "Sandbox").

`run_program(program, test, entry_point)` runs `harness.py` in a new process:
`program` (prompt + completion, untrusted) runs in one process, `test` (prompt
+ the task's test, trusted) in another, the checker, which calls
`check(entry_point)` and sends each call of the entry point across as plain
data. The verdict comes back on a pipe that only the checker holds, so the
tested code cannot write `passed` anywhere that counts.

Containment (see `isolation.py` for how it is chosen, `jail.py` for the
filesystem): Linux namespaces where the machine allows (mount with a read-only
root and private size-limited tmpfs scratch space, PID, network, IPC, UTS),
else a fallback that says so in the notes. Always: a fresh unprivileged uid
per run when ddtune is root, rlimits, a scrubbed environment, `python -I -S
-B`, and an audit hook as a second line of defence.

Outcomes: passed, assertion, exception:<Type>, timeout, syntax_error, killed,
exit_without_check. A setup failure of the sandbox raises `SandboxError`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

import psutil

from ddtune.bench.sandbox.isolation import Plan, fallback_plan, find_unshare, namespace_plan

HARNESS = Path(__file__).with_name("harness.py")
OUTPUT_TAIL_BYTES = 4096
UID_BASE, UID_PAIRS = 0x7E000000, 1 << 23  # fresh uids: above systemd's container ranges
MIB = 1024 * 1024
PROBE_PROGRAM = "def probe():\n    return 1\n"
PROBE_TEST = "def check(candidate):\n    assert candidate() == 1\n"
OUTCOME_PREFIXES = ("passed", "assertion", "exception:", "timeout", "syntax_error", "killed")


class SandboxError(RuntimeError):
    """The sandbox itself could not be set up (not a verdict on the tested code)."""


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 5.0  # wall clock
    memory_mb: int = 1024  # address space
    max_processes: int = 32  # processes and threads of the tested code
    max_file_mb: int = 16
    max_open_files: int = 64
    disk_mb: int = 64  # /task, /tmp, /var/tmp and /dev/shm together (namespaces only)


@dataclass
class ExecResult:
    outcome: str  # passed | assertion | exception:<Type> | timeout | syntax_error | killed | exit_without_check
    detail: str
    duration_s: float
    returncode: int | None
    pgid: int  # process group of the run; empty once the run returned
    isolation: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"


def run_program(
    program: str,
    test: str,
    entry_point: str,
    limits: SandboxLimits | None = None,
    plan: Plan | None = None,
) -> ExecResult:
    """Run `program` (defines `entry_point`) against `test` (defines `check`) in the sandbox."""
    limits = limits or SandboxLimits()
    plan = plan or isolation_plan()
    uids = _fresh_uids() if plan.root else (None, None)
    with _workdir(plan, uids[0]) as workdir:
        config = _config(program, entry_point, limits, plan, uids, workdir)
        try:
            return _execute(config, test, limits, plan)
        finally:
            if plan.root and plan.jail is None:
                _kill_uids(uids)


def isolation_notes() -> list[str]:
    """The containment this machine gives a test run, in words (for the bench JSON and report)."""
    return list(isolation_plan().notes)


@lru_cache(maxsize=1)
def isolation_plan() -> Plan:
    """Namespaces when a probe task passes inside them, else the fallback; once per process."""
    unshare = find_unshare()
    if unshare is None:
        return fallback_plan("unshare(1) from util-linux not found")
    plan = namespace_plan(unshare, os.geteuid() == 0)
    problem = probe(plan)
    return plan if problem is None else fallback_plan(f"namespaces unavailable: {problem}")


def probe(plan: Plan) -> str | None:
    """None when a trivial task passes under `plan`, else what went wrong."""
    try:
        result = run_program(PROBE_PROGRAM, PROBE_TEST, "probe", SandboxLimits(timeout_s=20), plan)
    except (SandboxError, OSError) as exc:
        return str(exc)[:200]
    return None if result.passed else f"{result.outcome}: {result.detail}"[:200]


def _fresh_uids() -> tuple[int, int]:
    """A uid for the tested code and one for the checker, owned by nobody else."""
    runner = UID_BASE + 2 * secrets.randbelow(UID_PAIRS)
    return runner, runner + 1


@contextlib.contextmanager
def _workdir(plan: Plan, uid: int | None) -> Iterator[str]:
    """The tested code's working directory: /task in the jail, else a host temp dir."""
    if plan.jail is not None:
        yield "/task"
        return
    path = tempfile.mkdtemp(prefix="ddtune-task-")
    try:
        if uid is not None:
            os.chown(path, uid, uid)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _config(
    program: str,
    entry_point: str,
    limits: SandboxLimits,
    plan: Plan,
    uids: tuple[int | None, int | None],
    workdir: str,
) -> dict[str, Any]:
    own_uid = plan.root or plan.jail is not None  # the tested code's processes are counted alone
    nproc = limits.max_processes + (0 if own_uid else _tasks_of_user(os.getuid()))
    common = {
        "cpu_s": int(limits.timeout_s) + 2,
        "memory_bytes": limits.memory_mb * MIB,
        "fsize_bytes": limits.max_file_mb * MIB,
        "nofile": limits.max_open_files,
        "core": 0,
    }
    jail = plan.jail and {**plan.jail, "disk_bytes": limits.disk_mb * MIB, "task_uid": uids[0]}
    return {
        "program": program,
        "entry_point": entry_point,
        "deadline_s": int(limits.timeout_s) + 10,  # the harness's own end, past the wall clock
        "jail": jail,
        "workdir": workdir,
        "runner_uid": uids[0],
        "checker_uid": uids[1],
        "nested_userns": plan.jail is not None and not plan.root,
        "runner_limits": {**common, "nproc": nproc},
        "checker_limits": {**common, "nproc": 1 if plan.root else None},
    }


def _tasks_of_user(uid: int) -> int:
    """Threads that count against RLIMIT_NPROC for `uid` right now."""
    total = 0
    for proc in psutil.process_iter(["uids", "num_threads"]):
        uids = proc.info["uids"]
        if uids is not None and uids.real == uid:
            total += proc.info["num_threads"] or 1
    return total


def _execute(config: dict[str, Any], test: str, limits: SandboxLimits, plan: Plan) -> ExecResult:
    config_fd, test_fd = _memfd(json.dumps(config)), _memfd(test)
    verdict_in, verdict_out = os.pipe()
    fds = (config_fd, test_fd, verdict_out)
    argv = [*plan.argv_prefix, plan.python, "-I", "-S", "-B", str(HARNESS), *map(str, fds)]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        try:
            proc = _spawn(argv, _environment(config["workdir"], plan), fds, out, err)
        except OSError:
            os.close(verdict_in)
            raise
        finally:
            for fd in fds:
                os.close(fd)
        timed_out = _wait(proc, limits.timeout_s)
        duration = time.monotonic() - start
        _kill_group(proc.pid)
        _wait_group_gone(proc.pid)
        verdict = _read_verdict(verdict_in)
        outcome, detail = _classify(timed_out, proc.returncode, verdict, _tail(err))
    return ExecResult(outcome, detail, duration, proc.returncode, proc.pid, list(plan.notes))


def _environment(workdir: str, plan: Plan) -> dict[str, str]:
    tmp = "/tmp" if plan.jail is not None else workdir
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": workdir, "TMPDIR": tmp}


def _spawn(
    argv: list[str], env: dict[str, str], fds: tuple[int, ...], out: IO[bytes], err: IO[bytes]
) -> subprocess.Popen:
    """The harness in its own session (its process group is killed afterwards)."""
    return subprocess.Popen(
        argv,
        cwd="/",
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=err,
        pass_fds=fds,
        start_new_session=True,
    )


def _memfd(text: str) -> int:
    fd = os.memfd_create("ddtune-sandbox")
    os.write(fd, text.encode("utf-8"))
    return fd


def _wait(proc: subprocess.Popen, timeout_s: float) -> bool:
    """Wait for the run; True when the wall-clock limit hit (the group is killed)."""
    try:
        proc.wait(timeout=timeout_s)
        return False
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.wait()
        return True


def _kill_group(pgid: int) -> None:
    """SIGKILL whatever is left in the run's process group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _wait_group_gone(pgid: int, timeout_s: float = 5.0) -> None:
    """Wait until no process of the group exists (call after reaping the leader)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            pass
        time.sleep(0.005)


def _kill_uids(uids: tuple[int | None, int | None], timeout_s: float = 5.0) -> None:
    """SIGKILL every process of the run's uids until none is left (fallback as root)."""
    wanted = {u for u in uids if u is not None}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [
            p
            for p in psutil.process_iter(["uids"])
            if p.info["uids"] and p.info["uids"].real in wanted
        ]
        if not found:
            return
        for process in found:
            with contextlib.suppress(psutil.Error):
                process.kill()
        time.sleep(0.01)


def _read_verdict(fd: int) -> dict[str, Any] | None:
    """The harness's one-line verdict; None when it wrote none (every writer has exited)."""
    os.set_blocking(fd, False)
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(65536) or b""
        except BlockingIOError:
            return None
    try:
        verdict = json.loads(data)
    except ValueError:
        return None
    return verdict if isinstance(verdict, dict) else None


def _tail(stream: IO[bytes]) -> str:
    stream.seek(0, os.SEEK_END)
    stream.seek(max(0, stream.tell() - OUTPUT_TAIL_BYTES))
    return stream.read().decode("utf-8", errors="replace")


def _classify(
    timed_out: bool, rc: int | None, verdict: dict[str, Any] | None, stderr: str
) -> tuple[str, str]:
    """Map how the run ended to an outcome class and a short detail."""
    if timed_out:
        return "timeout", "wall-clock limit reached"
    last_err = (stderr.strip().splitlines()[-1:] or [""])[0][:200]
    if verdict is not None:
        if "setup_error" in verdict:
            raise SandboxError(f"the sandbox could not be set up: {verdict['setup_error']}")
        outcome, detail = str(verdict.get("outcome", "")), str(verdict.get("detail", ""))
        if outcome == "exit_without_check":
            return outcome, f"{detail}: {last_err}" if last_err else detail
        if outcome.startswith(OUTCOME_PREFIXES):
            return outcome, detail
    if rc is not None and rc < 0:
        sig = signal.Signals(-rc)
        if sig == signal.SIGXCPU:
            return "timeout", "CPU-time limit reached (SIGXCPU)"
        return "killed", f"killed by {sig.name}"
    if rc is not None and rc >= 128 and rc - 128 in signal.valid_signals():
        return "killed", f"killed by {signal.Signals(rc - 128).name}"
    return "exit_without_check", f"exited with code {rc} before check() returned: {last_err}"
