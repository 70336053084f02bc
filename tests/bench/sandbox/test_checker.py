"""The sandbox contains what generated code can do wrong: loops, memory, forks, writes, exits."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest

import ddtune.bench.sandbox.wire as wire
from ddtune.bench.sandbox.checker import ExecResult, SandboxLimits, isolation_plan, run_program
from ddtune.bench.sandbox.isolation import fallback_plan, find_unshare, namespace_plan

FAST = SandboxLimits(timeout_s=3.0, memory_mb=512)
CALL = "def check(candidate):\n    candidate()\n"
CLEAR_HOOK = (  # the audit hook is a second line only: tests of the real walls switch it off
    "    main = sys.modules['__main__']\n"
    "    for name in ('DENIED_EVENTS', 'PATH_EVENTS', 'OPEN_EVENTS'):\n"
    "        getattr(main, name).clear()\n"
)


def run(body: str, test: str = CALL, limits: SandboxLimits = FAST, **kw) -> ExecResult:
    """`def f(): <body>` is the tested program, `test` the checker's test."""
    program = f"import os, sys\n\ndef f():\n{body}\n"
    return run_program(program, f"import os, sys\n\n{test}", "f", limits, **kw)


def test_correct_code_passes() -> None:
    result = run("    return 3", "def check(c):\n    assert c() == 3\n")
    assert result.outcome == "passed" and result.passed


@pytest.mark.parametrize(
    ("body", "test", "outcome"),
    [
        ("    return 2", "def check(c):\n    assert c() == 3\n", "assertion"),
        ("    return 1 / 0", CALL, "exception:ZeroDivisionError"),
        ("    return [][1]", CALL, "exception:IndexError"),
        ("    return (", CALL, "syntax_error"),
        ("    return 1", "def check(c:\n    pass\n", "syntax_error"),  # a broken test
        ("    return 1", "def helper():\n    pass\n", "exception:NameError"),  # no check()
        ("    class Oops(Exception): pass\n    raise Oops('x')", CALL, "exception:Oops"),
        ("    assert False, 'inside'", CALL, "assertion"),
        ("    return f", CALL, "exception:TypeError"),  # a function cannot cross
    ],
)
def test_failure_classes(body: str, test: str, outcome: str) -> None:
    assert run(body, test).outcome == outcome


def test_top_level_code_of_the_program_runs_in_the_tested_process() -> None:
    program = "def f():\n    return 1\nraise KeyError('top')\n"
    result = run_program(program, "def check(c):\n    assert c() == 1\n", "f", FAST)
    assert result.outcome == "exception:KeyError" and "top" in result.detail


def test_exceptions_cross_as_their_builtin_class() -> None:
    body = "    raise ValueError('no')"
    test = "def check(c):\n    try:\n        c()\n    except ValueError as exc:\n        assert str(exc) == 'no'\n"
    assert run(body, test).outcome == "passed"


def test_plain_values_cross_unchanged() -> None:
    value = "[1, 2**80, -2**70, 1.5, float('inf'), 'é\\n', b'\\x00', (1, (2,)), {1: [None, True]}, {3}, frozenset({4}), 2j, []]"
    test = f"def check(c):\n    got = c({value})\n    assert got == {value}, got\n    assert type(got[7]) is tuple and math.isnan(c(float('nan')))\n"
    body = "    return args[0] if len(args) == 1 else args"
    program = f"def f(*args):\n{body}\n"
    result = run_program(program, "import math\n" + test, "f", FAST)
    assert result.outcome == "passed", result.detail


def test_wire_rejects_what_is_not_plain_data() -> None:
    for bad in ({"x": 1, "y": 2}, {"q": []}, {"s": [[1]]}, {"i": 5}, {"d": [[1]]}):
        with pytest.raises(wire.ChannelError):
            wire.decode(bad)
    with pytest.raises(TypeError):
        wire.encode(object())
    assert wire.decode(wire.encode({(1, 2): {b"a"}})) == {(1, 2): {b"a"}}
    assert math.isinf(wire.decode(wire.encode(float("-inf"))))


def test_infinite_loop_times_out() -> None:
    start = time.monotonic()
    result = run("    while True:\n        pass")
    assert result.outcome == "timeout"
    assert time.monotonic() - start < FAST.timeout_s + 4


def test_memory_hog_is_killed() -> None:
    hog = "    blocks = []\n    while True:\n        blocks.append(bytearray(1024 * 1024 * 1024))"
    result = run(hog, limits=SandboxLimits(timeout_s=10.0, memory_mb=512))
    assert result.outcome == "killed", result.detail


def test_fork_bomb_is_contained() -> None:
    bomb = "    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass"
    start = time.monotonic()
    result = run(bomb)
    assert result.outcome in ("timeout", "killed")
    assert time.monotonic() - start < FAST.timeout_s + 6
    with pytest.raises(ProcessLookupError):  # nothing of the run's process group is left
        os.killpg(result.pgid, 0)


def test_process_limit_stops_forks() -> None:
    forks = "    pids = [os.fork() for _ in range(200)]\n    if 0 in pids:\n        os._exit(0)\n    return len(pids)"
    result = run(forks, limits=SandboxLimits(timeout_s=5, max_processes=16))
    assert result.outcome == "exception:BlockingIOError", result.detail


def test_writes_outside_the_temp_dir_are_denied(tmp_path: Path) -> None:
    targets = [tmp_path / "escape.txt", Path("/tmp") / f"ddtune-escape-{os.getpid()}.txt"]
    for target in targets:
        result = run(f"    open({str(target)!r}, 'w').write('x')")
        assert result.outcome == "exception:PermissionError", result.detail
        assert not target.exists()


def test_writes_inside_the_temp_dir_are_allowed() -> None:
    body = "    open('scratch.txt', 'w').write('ok')\n    return open('scratch.txt').read()"
    assert run(body, "def check(c):\n    assert c() == 'ok'\n").outcome == "passed"


def test_sys_exit_zero_is_not_a_pass() -> None:
    assert run("    sys.exit(0)").outcome == "exit_without_check"
    assert run("    os._exit(0)").outcome == "exit_without_check"
    test = "def check(c):\n    sys.exit(0)\n"  # inside the test itself
    assert run("    return 1", test).outcome == "exit_without_check"


def test_a_test_that_swallows_the_ended_process_still_fails() -> None:
    test = "def check(c):\n    try:\n        c()\n    except BaseException:\n        pass\n"
    result = run("    os._exit(0)", test)
    assert result.outcome == "exit_without_check", result.detail


def test_garbage_on_the_channel_fails_even_when_the_test_swallows_errors() -> None:
    body = CLEAR_HOOK + "    os.write(4, b'{\"nothing\": 1}\\n')\n    return 1"
    test = "def check(c):\n    try:\n        c()\n    except Exception:\n        pass\n"
    result = run(body, test)
    assert result.outcome == "exception:ChannelError", result.detail


def test_printing_a_fake_success_line_is_not_a_pass() -> None:
    body = "    print('passed')\n    print('0' * 32 + ' passed')\n    sys.stdout.flush()\n    os._exit(0)"
    assert run(body).outcome == "exit_without_check"


def test_environment_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDTUNE_TEST_SECRET", "hunter2")
    body = "    return sorted(os.environ)"
    test = "def check(c):\n    assert 'DDTUNE_TEST_SECRET' not in c(), c()\n    assert set(c()) <= {'PATH', 'LANG', 'HOME', 'TMPDIR', 'LC_CTYPE'}, c()\n"
    assert run(body, test).outcome == "passed"


def test_network_is_blocked() -> None:
    body = "    import socket\n    socket.create_connection(('127.0.0.1', 9), timeout=1)"
    assert run(body).outcome == "exception:PermissionError"


def test_this_machine_uses_namespaces() -> None:
    """CI and the dev machines run as root with unshare: the fallback must not hide here."""
    plan = isolation_plan()
    assert plan.mechanism == "namespaces", plan.notes
    assert "bubblewrap is not used" in plan.notes[0]


def test_network_namespace_has_only_loopback() -> None:
    body = "    return sorted(line.split(':')[0].strip() for line in open('/proc/net/dev').readlines()[2:])"
    assert run(body, "def check(c):\n    assert c() == ['lo'], c()\n").outcome == "passed"


def test_disk_quota_is_shared_by_task_tmp_and_shm() -> None:
    body = CLEAR_HOOK + (
        "    written = 0\n"
        "    for i, where in enumerate(['/task', '/tmp', '/var/tmp', '/dev/shm'] * 5):\n"
        "        try:\n"
        "            with open(f'{where}/blob{i}', 'wb') as out:\n"
        "                out.write(b'x' * (15 * 1024 * 1024))\n"
        "                out.flush()\n"
        "            written += 15\n"
        "        except OSError:\n"
        "            pass\n"
        "    return written"
    )
    test = "def check(c):\n    assert c() <= 16, c()\n"
    limits = SandboxLimits(timeout_s=10.0, disk_mb=16)
    result = run(body, test, limits)
    assert result.outcome == "passed", result.detail


def test_fallback_without_namespaces_says_so_and_still_works() -> None:
    plan = fallback_plan("forced by a test")
    assert plan.mechanism == "none" and "NO NAMESPACES (forced by a test)" in plan.notes[0]
    result = run("    return 3", "def check(c):\n    assert c() == 3\n", plan=plan)
    assert result.outcome == "passed", result.detail
    assert result.isolation == list(plan.notes)
    assert (
        run("    return 2", "def check(c):\n    assert c() == 3\n", plan=plan).outcome
        == "assertion"
    )


def test_paths_to_hide_inside_bound_directories_are_masked() -> None:
    """Were ddtune installed under /usr or the interpreter's prefix, its folder would be masked so."""
    unshare = find_unshare()
    assert unshare is not None
    plan = namespace_plan(unshare, os.geteuid() == 0, hide=("/usr/share/doc", "/etc/hosts"))
    assert {"/usr/share/doc", "/etc/hosts"} <= set(plan.jail["hide"])
    body = (
        "    try:\n"
        "        listing = os.listdir('/usr/share/doc')\n"
        "    except PermissionError:\n"
        "        listing = []\n"
        "    return [listing, open('/etc/hosts').read(), os.path.isdir('/usr/share')]"
    )
    result = run(body, "def check(c):\n    assert c() == [[], '', True], c()\n", plan=plan)
    assert result.outcome == "passed", result.detail
