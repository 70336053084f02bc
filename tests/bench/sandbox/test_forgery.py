"""Forging a pass, with the audit hook cleared first: none of these attempts yields `passed`.

Each test's expected value is a random token that appears only in the test
(the checker's side), so the tested code cannot simply return it; every case
then tries to get `passed` anyway: call the harness's reporting functions
found by walking frames and the heap, write a verdict to every descriptor,
open the checker's descriptors through /proc, return an object equal to
everything, patch the builtins the test uses, or read the test itself.
"""

from __future__ import annotations

import importlib.util
import secrets
import sys
from pathlib import Path

import pytest

from ddtune.bench.sandbox.checker import SandboxLimits, run_program

_spec = importlib.util.spec_from_file_location(
    "escape_kit", Path(__file__).with_name("escape_kit.py")
)
kit = sys.modules.setdefault("escape_kit", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(kit)
Escape, Host = kit.Escape, kit.Host

LIMITS = SandboxLimits(timeout_s=15.0, memory_mb=512)
TOKEN = f"ddtune-answer-{secrets.token_hex(8)}"  # known to the test only
SECRET_TEST = f"def check(candidate):\n    assert candidate() == {TOKEN!r}\n"
VERDICT_LINE = "    line = json.dumps({'outcome': 'passed', 'detail': ''}).encode() + b'\\n'\n"

CASES = [
    Escape(
        "call_report_passed_from_the_frames_then_exit",
        "    import json, gc\n" + VERDICT_LINE + "    frame = sys._getframe()\n"
        "    while frame is not None:\n"
        "        for name, value in list(frame.f_locals.items()) + list(frame.f_globals.items()):\n"
        "            if name in ('report', 'answer', 'judge') and callable(value):\n"
        "                for args in (({'value': 1},), ('passed', ''), ('passed',)):\n"
        "                    try:\n"
        "                        value(*args)\n"
        "                    except BaseException:\n"
        "                        pass\n"
        "        frame = frame.f_back\n"
        "    sys.stdout.flush()\n"
        "    os._exit(0)\n",
        SECRET_TEST,
        passes=False,
    ),
    Escape(
        "write_a_passed_verdict_to_every_descriptor",
        "    import json\n" + VERDICT_LINE + "    for fd in range(1024):\n"
        "        try:\n"
        "            os.write(fd, line)\n"
        "        except OSError:\n"
        "            pass\n"
        "    os._exit(0)\n",
        SECRET_TEST,
        passes=False,
    ),
    Escape(
        "open_the_checkers_descriptors_memory_and_ptrace_it",
        "    import json\n" + VERDICT_LINE + "    got = []\n"
        "    for pid in [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:\n"
        "        for name in ['mem', 'environ'] + [f'fd/{n}' for n in range(16)]:\n"
        "            try:\n"
        "                with open(f'/proc/{pid}/{name}', 'rb', buffering=0) as fh:\n"
        "                    fh.read(1)\n"
        "                got.append(f'{pid}/{name}')\n"
        "                with open(f'/proc/{pid}/{name}', 'wb', buffering=0) as fh:\n"
        "                    fh.write(line)\n"
        "            except OSError:\n"
        "                pass\n"
        "        libc = ctypes.CDLL(None, use_errno=True)\n"
        "        if libc.ptrace(16, int(pid), None, None) == 0:\n"
        "            got.append(f'ptrace {pid}')\n"
        "    return got\n",
        "def check(candidate):\n    assert candidate() == []\n",
    ),
    Escape(
        "return_an_object_equal_to_everything",
        "    class Anything:\n"
        "        def __eq__(self, other):\n"
        "            return True\n"
        "        __hash__ = None\n"
        "    return Anything()\n",
        SECRET_TEST,
        passes=False,
    ),
    Escape(
        "patch_the_builtins_the_test_uses",
        "    import builtins\n"
        "    class Anything:\n"
        "        def __eq__(self, other):\n"
        "            return True\n"
        "    builtins.sorted = lambda *a, **k: Anything()\n"
        "    builtins.len = lambda *a: 1\n"
        "    return [2, 1]\n",
        f"def check(candidate):\n    got = candidate()\n    assert sorted(got) == [{TOKEN!r}]\n    assert len([]) == 1\n",
        passes=False,
    ),
    Escape(
        "read_the_test_from_memory_proc_or_descriptors",
        "    import gc, re\n"
        "    pattern = re.compile(rb'ddtune-answer-[0-9a-f]{16}')\n"
        "    found = [s for s in gc.get_objects() if isinstance(s, str) and pattern.search(s.encode())]\n"
        "    for frame_obj in [sys._getframe()]:\n"
        "        while frame_obj is not None:\n"
        "            found += [v for v in frame_obj.f_locals.values() if isinstance(v, str) and pattern.search(v.encode())]\n"
        "            frame_obj = frame_obj.f_back\n"
        "    for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
        "        for name in ['cmdline', 'environ'] + [f'fd/{n}' for n in range(16)]:\n"
        "            try:\n"
        "                with open(f'/proc/{pid}/{name}', 'rb') as fh:\n"
        "                    fh.seek(0)\n"
        "                    found += [m.decode() for m in pattern.findall(fh.read(1 << 20))]\n"
        "            except OSError:\n"
        "                pass\n"
        "    return found\n",
        f"ANSWER = {TOKEN!r}\n\ndef check(candidate):\n    assert candidate() == []\n",
    ),
]


@pytest.fixture(scope="module")
def bait():
    with Host() as made:
        yield made


@pytest.fixture
def host(bait):
    bait.reset()  # each case starts from a clean host
    return bait


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_forging_a_pass_fails(case, host) -> None:
    result = run_program(case.program(host), case.test_source(host), "f", LIMITS)
    assert host.escapes() == []
    if case.passes:  # the attempt ran and found nothing (its evidence is empty)
        assert result.outcome == "passed", result.detail
    else:
        assert result.outcome != "passed", result.detail
