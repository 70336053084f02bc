"""The sandbox contains what generated code can do wrong: loops, memory, forks, writes, exits."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ddtune.bench.sandbox import SandboxLimits, _isolation_plan, run_program

FAST = SandboxLimits(timeout_s=3.0, memory_mb=512)


def program(body: str, test: str = "def check(candidate):\n    candidate()\n") -> str:
    return f"import os, sys\n\ndef f():\n{body}\n\n{test}"


def test_correct_code_passes() -> None:
    result = run_program(program("    return 3", "def check(c):\n    assert c() == 3\n"), "f", FAST)
    assert result.outcome == "passed" and result.passed


@pytest.mark.parametrize(
    ("body", "test", "outcome"),
    [
        ("    return 2", "def check(c):\n    assert c() == 3\n", "assertion"),
        ("    return 1 / 0", "def check(c):\n    c()\n", "exception:ZeroDivisionError"),
        ("    return [][1]", "def check(c):\n    c()\n", "exception:IndexError"),
        ("    return (", "def check(c):\n    c()\n", "syntax_error"),
        ("    return 1", "def helper():\n    pass\n", "exception:NameError"),  # no check()
    ],
)
def test_failure_classes(body: str, test: str, outcome: str) -> None:
    assert run_program(program(body, test), "f", FAST).outcome == outcome


def test_infinite_loop_times_out() -> None:
    start = time.monotonic()
    result = run_program(program("    while True:\n        pass"), "f", FAST)
    assert result.outcome == "timeout"
    assert time.monotonic() - start < FAST.timeout_s + 4


def test_memory_hog_is_killed() -> None:
    hog = "    blocks = []\n    while True:\n        blocks.append(bytearray(1024 * 1024 * 1024))"
    result = run_program(program(hog), "f", SandboxLimits(timeout_s=10.0, memory_mb=512))
    assert result.outcome == "killed", result.detail


def test_fork_bomb_is_contained() -> None:
    bomb = "    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass"
    start = time.monotonic()
    result = run_program(program(bomb), "f", FAST)
    assert result.outcome in ("timeout", "killed")
    assert time.monotonic() - start < FAST.timeout_s + 6
    with pytest.raises(ProcessLookupError):  # nothing of the run's process group is left
        os.killpg(result.pgid, 0)


def test_process_limit_stops_forks() -> None:
    forks = "    pids = [os.fork() for _ in range(200)]\n    if 0 in pids:\n        os._exit(0)\n    return len(pids)"
    result = run_program(program(forks), "f", SandboxLimits(timeout_s=5, max_processes=16))
    assert result.outcome == "exception:BlockingIOError", result.detail


def test_writes_outside_the_temp_dir_are_denied(tmp_path: Path) -> None:
    targets = [tmp_path / "escape.txt", Path("/tmp") / f"ddtune-escape-{os.getpid()}.txt"]
    for target in targets:
        body = f"    open({str(target)!r}, 'w').write('x')"
        result = run_program(program(body), "f", FAST)
        assert result.outcome == "exception:PermissionError", result.detail
        assert not target.exists()


def test_writes_inside_the_temp_dir_are_allowed() -> None:
    body = "    open('scratch.txt', 'w').write('ok')\n    return open('scratch.txt').read()"
    result = run_program(program(body, "def check(c):\n    assert c() == 'ok'\n"), "f", FAST)
    assert result.outcome == "passed", result.detail


def test_sys_exit_zero_is_not_a_pass() -> None:
    assert run_program(program("    sys.exit(0)"), "f", FAST).outcome == "exit_without_check"
    assert run_program(program("    os._exit(0)"), "f", FAST).outcome == "exit_without_check"
    test = "def check(c):\n    sys.exit(0)\n"  # inside the test itself
    assert run_program(program("    return 1", test), "f", FAST).outcome == "exit_without_check"


def test_printing_a_fake_success_line_is_not_a_pass() -> None:
    body = "    print('passed')\n    print('0' * 32 + ' passed')\n    sys.stdout.flush()\n    os._exit(0)"
    assert run_program(program(body), "f", FAST).outcome == "exit_without_check"


def test_environment_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDTUNE_TEST_SECRET", "hunter2")
    body = "    return sorted(os.environ)"
    test = "def check(c):\n    assert 'DDTUNE_TEST_SECRET' not in c(), c()\n    assert set(c()) <= {'PATH', 'LANG', 'HOME', 'TMPDIR', 'LC_CTYPE'}, c()\n"
    assert run_program(program(body, test), "f", FAST).outcome == "passed"


def test_network_is_blocked() -> None:
    body = "    import socket\n    socket.create_connection(('127.0.0.1', 9), timeout=1)"
    assert run_program(program(body), "f", FAST).outcome == "exception:PermissionError"


@pytest.mark.skipif(
    "netns" not in _isolation_plan().notes, reason="no network namespaces on this machine"
)
def test_network_namespace_has_only_loopback() -> None:
    body = "    return sorted(line.split(':')[0].strip() for line in open('/proc/net/dev').readlines()[2:])"
    result = run_program(program(body, "def check(c):\n    assert c() == ['lo'], c()\n"), "f", FAST)
    assert result.outcome == "passed", result.detail
