"""Fixtures for the services tests: free ports, the fake fault server, a FAKE GPU ledger.

`FakeLedgerGpu` is a fake GpuProbe (no GPU here): the fake fault server writes
`<ledger>/<pid>.json` = {pid, mib, release_after}; memory counts while the pid
lives and, after it dies, for `release_after` more seconds (None = never),
the way a driver releases a dead context late or not at all. With
`attribute=False` it hides per-process usage (as nvidia-smi or a PID namespace would).
"""

from __future__ import annotations

import json
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ddtune.params import DecodeParams
from ddtune.services import GpuDevice, ServiceSpec, build_controller, procs
from ddtune.services.controllers.process import scope_prefix

FAULT_SERVER = Path(__file__).with_name("fake_fault_server.py")
FAST_TIMEOUTS = {
    "stop": 2.0,
    "quiesce": 3.0,
    "gpu": 3.0,
    "start": 6.0,
    "health": 6.0,
    "identity": 2.0,
    "generate": 5.0,
    "request": 2.0,
}


class FakeLedgerGpu:
    """FAKE GPU probe backed by the fault server's ledger files (one fake GPU)."""

    name = "fake-ledger"

    def __init__(self, ledger: Path, base_mib: float = 500.0, attribute: bool = True) -> None:
        self.ledger, self.base_mib, self.attribute = ledger, base_mib, attribute
        self.dead_since: dict[int, float] = {}

    def read(self) -> list[GpuDevice]:
        used, held = self.base_mib, {}
        for path in self.ledger.glob("*.json"):
            try:
                entry = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # being written
            pid, mib = entry["pid"], entry["mib"]
            if procs.is_alive(pid):
                used, held[pid] = used + mib, mib
                continue
            since = self.dead_since.setdefault(pid, time.monotonic())
            if entry["release_after"] is None or time.monotonic() - since < entry["release_after"]:
                used += mib
        return [GpuDevice(0, used, held if self.attribute else {})]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fault_command(*switches: str) -> list[str]:
    """argv of the fake fault server with the ddtune placeholders and extra switches.

    `python -S` (no site-packages): the server is stdlib only and starts faster.
    """
    base = [sys.executable, "-S", str(FAULT_SERVER), "--port", "{port}", "--mode", "{mode}"]
    return base + ["--budget", "{budget}", "--topk", "{topk}", "--window", "{window}", *switches]


def make_spec(port: int, command: list[str], **overrides: Any) -> ServiceSpec:
    table: dict[str, Any] = {"command": command, "port": port, "gpu": "off", "generations": 2}
    table["timeouts"] = {**FAST_TIMEOUTS, **overrides.pop("timeouts", {})}
    table.update(overrides)
    return ServiceSpec.from_dict(table)


def leftovers(workdir: Path) -> list[procs.ProcInfo]:
    """Live processes that carry this workdir's instance tag."""
    return procs.find_instance(tag=scope_prefix(workdir), tag_prefix=True)


PARAMS = DecodeParams("ddtree", 16, 4, None)


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def controllers(tmp_path):
    """Create controllers with `new(spec, gpu=None)`; all are closed and checked at teardown."""
    made = []

    def new(spec: ServiceSpec, gpu: Any = None, name: str = "work"):
        ctl = build_controller(spec, tmp_path / name, gpu_probe=gpu)
        made.append(ctl)
        return ctl

    yield new
    for ctl in made:
        ctl.close()
        assert leftovers(ctl.workdir) == [], "a process was left behind after close()"


def run_scenarios(scenarios: dict[str, Any], tmp_path_factory) -> dict[str, BaseException | None]:
    """Run each `scenario(controllers, tmp_path)` in its own thread; keep each one's exception.

    The cases mostly wait on real processes, so running them together saves
    minutes. Every controller a scenario made is closed and checked for leftovers.
    """

    def run(name: str) -> tuple[str, BaseException | None]:
        tmp_path, made = tmp_path_factory.mktemp("scenario"), []

        def controllers(spec: ServiceSpec, gpu: Any = None, name: str = "work"):
            made.append(build_controller(spec, tmp_path / name, gpu_probe=gpu))
            return made[-1]

        try:
            scenarios[name](controllers, tmp_path)
            for ctl in made:
                ctl.close()
                assert leftovers(ctl.workdir) == [], "a process was left behind after close()"
        except BaseException as exc:  # handed to the test that reports it
            for ctl in made:
                ctl.close()
            return name, exc
        return name, None

    with ThreadPoolExecutor(len(scenarios)) as pool:
        return dict(pool.map(run, scenarios))


class Helpers:
    """What the test modules need from here (importlib mode: conftest is not importable)."""

    FakeLedgerGpu = FakeLedgerGpu
    fault_command = staticmethod(fault_command)
    make_spec = staticmethod(make_spec)
    leftovers = staticmethod(leftovers)
    free_port = staticmethod(free_port)
    run_scenarios = staticmethod(run_scenarios)
    params = PARAMS
    fault_server = FAULT_SERVER


@pytest.fixture(scope="session")
def svc() -> type[Helpers]:
    return Helpers
