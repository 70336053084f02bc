"""Run untrusted generated code (prompt + completion + test) in a contained subprocess.

Layers, strongest first, each used where the machine allows it:

1. `unshare --user --map-root-user --net --pid --fork --kill-child`: no network
   (a fresh network namespace has only a downed loopback) and a private PID
   namespace: when the task's main process ends, the kernel kills every
   process it started, fork bombs included.
2. When ddtune runs as root, the task runs as `nobody` (so it cannot write
   files it does not own, and the process limit applies at all; the kernel
   exempts root from RLIMIT_NPROC).
3. Resource limits set by the harness before any task code runs: CPU seconds,
   address space, processes, file size, open files, no core dumps.
4. A scrubbed environment (PATH, LANG, HOME/TMPDIR = the task's own temp dir),
   the temp dir as cwd, `python -I -B` (no user site, no PYTHON* variables).
5. An audit hook in the harness (`_harness.py`) denying writes outside the
   temp dir, sockets, and starting other programs: a second line of defence
   where namespaces are unavailable, not a security boundary on its own.

Outcomes: passed, assertion, exception:<Type>, timeout, syntax_error, killed,
exit_without_check. A pass needs a line with a random nonce that the harness
prints only after `check()` returned.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

HARNESS = Path(__file__).with_name("_harness.py")
NOBODY_UID = 65534
SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")
OUTPUT_TAIL_BYTES = 4096


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 5.0  # wall clock
    memory_mb: int = 1024  # address space
    max_processes: int = 32  # beyond those the user already runs
    max_file_mb: int = 16
    max_open_files: int = 64


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


def run_program(program: str, entry_point: str, limits: SandboxLimits | None = None) -> ExecResult:
    """Execute `program` (which defines `check`) and call `check(entry_point)` in the sandbox."""
    limits = limits or SandboxLimits()
    plan = _isolation_plan()
    workdir = Path(tempfile.mkdtemp(prefix="ddtune-task-"))
    try:
        _prepare_workdir(workdir, program, plan.uid)
        config = _harness_config(entry_point, limits, plan.uid)
        return _execute(workdir, config, limits, plan)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def isolation_notes() -> list[str]:
    """The containment layers this machine gives a test run, e.g. ["rlimits", ..., "netns", "pidns"]."""
    return list(_isolation_plan().notes)


@dataclass(frozen=True)
class _Plan:
    argv_prefix: tuple[str, ...]  # the unshare wrapper, or empty
    python: str
    uid: int | None  # run as this user (root only), else None
    notes: tuple[str, ...]


@lru_cache(maxsize=1)
def _isolation_plan() -> _Plan:
    """Decide once per process which layers this machine supports."""
    notes = ["rlimits", "scrubbed-env", "audit-guard"]
    uid, python = None, sys.executable
    if os.geteuid() == 0:
        python = _python_for_others() or ""
        if python:
            uid = NOBODY_UID
            notes.append("uid:nobody")
        else:
            python = sys.executable
            notes.append("runs-as-root(no interpreter readable by nobody)")
    prefix: tuple[str, ...] = ()
    unshare = shutil.which("unshare")
    wrapper = (unshare or "", "-r", "-n", "-p", "-f", "--kill-child")
    if unshare and _probe(wrapper, uid):
        prefix = wrapper
        notes += ["netns", "pidns"]
    else:
        notes.append("no-namespaces(network blocked by audit guard only)")
    return _Plan(prefix, python, uid, tuple(notes))


def _python_for_others() -> str | None:
    """An interpreter that `nobody` can execute: ours if every folder on its path is world-traversable."""
    for candidate in (sys.executable, *SYSTEM_PYTHONS):
        real = Path(os.path.realpath(candidate))
        if real.is_file() and all(os.stat(p).st_mode & stat.S_IXOTH for p in [real, *real.parents]):
            return str(real)
    return None


def _probe(wrapper: tuple[str, ...], uid: int | None) -> bool:
    try:
        done = subprocess.run([*wrapper, "true"], user=uid, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _prepare_workdir(workdir: Path, program: str, uid: int | None) -> None:
    (workdir / "program.py").write_text(program, encoding="utf-8")
    shutil.copyfile(HARNESS, workdir / "harness.py")
    if uid is not None:
        for path in (workdir, *workdir.iterdir()):
            os.chown(path, uid, uid)


def _harness_config(entry_point: str, limits: SandboxLimits, uid: int | None) -> dict:
    running = _tasks_of_user(os.getuid() if uid is None else uid)
    mib = 1024 * 1024
    return {
        "nonce": secrets.token_hex(16),
        "entry_point": entry_point,
        "limits": {
            "cpu_s": int(limits.timeout_s) + 2,
            "memory_bytes": limits.memory_mb * mib,
            "nproc": running + limits.max_processes,
            "fsize_bytes": limits.max_file_mb * mib,
            "nofile": limits.max_open_files,
        },
    }


def _tasks_of_user(uid: int) -> int:
    """Threads that count against RLIMIT_NPROC for `uid` right now (Linux; 0 elsewhere)."""
    total = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            lines = status.read_text().splitlines()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in lines if ":" in line)
        if fields.get("Uid", "").split()[:1] == [str(uid)]:
            total += int(fields.get("Threads", "1").strip() or 1)
    return total


def _execute(workdir: Path, config: dict, limits: SandboxLimits, plan: _Plan) -> ExecResult:
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(workdir), "TMPDIR": str(workdir)}
    argv = [*plan.argv_prefix, plan.python, "-I", "-B", "harness.py"]
    stdout_path, stderr_path = workdir / "stdout.txt", workdir / "stderr.txt"
    start = time.monotonic()
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            argv,
            cwd=workdir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            user=plan.uid,
            group=plan.uid,
            extra_groups=[] if plan.uid is not None else None,
            start_new_session=True,
        )
        timed_out = _feed_and_wait(proc, json.dumps(config) + "\n", limits.timeout_s)
    duration = time.monotonic() - start
    _kill_group(proc.pid)
    _wait_group_gone(proc.pid)
    outcome, detail = _classify(
        timed_out, proc.returncode, _tail(stdout_path), _tail(stderr_path), config["nonce"]
    )
    return ExecResult(outcome, detail, duration, proc.returncode, proc.pid, list(plan.notes))


def _feed_and_wait(proc: subprocess.Popen, line: str, timeout_s: float) -> bool:
    """Send the config line, wait; True when the wall-clock limit hit (the group is killed)."""
    try:
        assert proc.stdin is not None
        proc.stdin.write(line.encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass
    try:
        proc.wait(timeout=timeout_s)
        return False
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.wait()
        return True


def _kill_group(pgid: int) -> None:
    """SIGKILL whatever is left in the run's process group (children the task left behind)."""
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
        time.sleep(0.02)


def _tail(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - OUTPUT_TAIL_BYTES))
        return f.read().decode("utf-8", errors="replace")


def _classify(
    timed_out: bool, rc: int | None, stdout: str, stderr: str, nonce: str
) -> tuple[str, str]:
    """Map how the run ended to an outcome class and a short detail."""
    if timed_out:
        return "timeout", "wall-clock limit reached"
    for line in reversed(stdout.splitlines()):
        if line.startswith(nonce + " "):
            outcome, _, detail = line[len(nonce) + 1 :].partition(" ")
            return outcome, _unquote(detail)
    last_err = stderr.strip().splitlines()[-1:] or [""]
    if rc is not None and rc < 0:
        sig = signal.Signals(-rc)
        if sig == signal.SIGXCPU:
            return "timeout", "CPU-time limit reached (SIGXCPU)"
        return "killed", f"killed by {sig.name}"
    if rc is not None and rc >= 128 and rc - 128 in signal.valid_signals():
        return "killed", f"killed by {signal.Signals(rc - 128).name}"
    return (
        "exit_without_check",
        f"exited with code {rc} before check() returned: {last_err[0][:200]}",
    )


def _unquote(text: str) -> str:
    """The harness prints the detail as a Python string literal."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return value if isinstance(value, str) else text
