"""Fixtures for the kinds tests: recorded engine replies and real witness processes.

`witness(env, argv, process_args=None)` starts a real (sleeping) process with
`env` added to its environment (and `process_args` on its command line) and
returns the `Launch` a controller would hold for it, so the kinds read the
process's environment and command line the way readiness does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from ddtune.engines import Launch

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixture():
    """Load one file of tests/engines/fixtures (JSON parsed, anything else as text)."""

    def load(name: str) -> Any:
        text = (FIXTURES / name).read_text()
        return json.loads(text) if name.endswith(".json") else text

    return load


@pytest.fixture
def witness():
    started: list[subprocess.Popen] = []

    def start(
        env: dict[str, str] | None = None,
        argv: list[str] | None = None,
        process_args: list[str] | None = None,
    ) -> Launch:
        command = ["sleep", "60"]
        if process_args is not None:
            command = [sys.executable, "-c", "import time; time.sleep(60)", *process_args]
        proc = subprocess.Popen(command, env={**os.environ, **(env or {})})
        started.append(proc)
        _wait_for_environ(proc.pid, env or {}, command)
        return Launch(main_pid=proc.pid, argv=argv)

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def _wait_for_environ(
    pid: int, env: dict[str, str], command: list[str], timeout: float = 10.0
) -> None:
    """Popen returns once exec began; the kernel publishes the new environ and argv a moment later."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        process = psutil.Process(pid)
        found = process.environ()
        if process.cmdline() == command and all(found.get(k) == v for k, v in env.items()):
            return
        time.sleep(0.01)
    raise AssertionError(f"pid {pid} never showed the environment {sorted(env)}")
