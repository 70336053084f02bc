"""Helpers shared by tests in several packages, through the `common` fixture.

`common.serve_argv(*args, port="0")` is `ddtune serve` as the tests run it (this
interpreter, `-m ddtune.cli`); `common.serve_args(target, drafter, **flags)` its
model arguments and `--flag value` pairs. `common.ServerProcess` is one
`ddtune serve --port 0` subprocess in its own process group that waits for the
single `ready instance_id=... port=...` stdout line and on close kills whatever
is left of the group; `common.serving(args, log_path)` starts one, waits until it
is ready and leaves nothing running afterwards. `random_engines(family,
block_size, context)` is a cached random float64 checkpoint and its `Engine` (the engine's
and the trace's tests). `common.setup_fake_systemd(base,
setenv)` installs the FAKE systemctl/journalctl of tests/services/fake_systemd.py
(the `fake_systemd` fixture does it for one test).

`tests/fixtures/` holds fakes and ground truth that tests and benchmarks share
(the simulated service of the strategy tests, sparse checkpoints of any size);
it is put on `sys.path` here, so a test imports them by module name.
"""

from __future__ import annotations

import importlib.util
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))

import pytest

SERVER_ENV = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def serve_argv(*args: str, port: str = "0") -> list[str]:
    """`python -m ddtune.cli serve --port PORT ARGS` with this interpreter."""
    return [sys.executable, "-m", "ddtune.cli", "serve", "--port", port, *args]


def serve_args(target: object, drafter: object, **flags: object) -> list[str]:
    """`--target T --drafter D`, then `--name value` per flag (`max_queue` -> `--max-queue`)."""
    args = ["--target", str(target), "--drafter", str(drafter)]
    for name, value in flags.items():
        args += [f"--{name.replace('_', '-')}", str(value)]
    return args


class ServerProcess:
    """One `ddtune serve` subprocess; `close()` leaves nothing running."""

    def __init__(self, args: list[str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("w")
        self.proc = subprocess.Popen(
            serve_argv(*args),
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            start_new_session=True,  # its own process group, like a controller would
            env={**os.environ, **SERVER_ENV},
        )
        self.pgid = self.proc.pid
        self.stdout_lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self.instance_id, self.port = "", 0

    def wait_ready(self, timeout: float = 180.0) -> ServerProcess:
        try:
            line = self.stdout_lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no ready line in {timeout}s; log:\n{self.log_tail()}") from None
        assert line.startswith("ready "), f"unexpected stdout {line!r}; log:\n{self.log_tail()}"
        fields = dict(part.split("=", 1) for part in line.split()[1:])
        self.instance_id, self.port = fields["instance_id"], int(fields["port"])
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def group_alive(self) -> bool:
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return False
        return True

    def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Poll `predicate` (about this server) until it holds; False after `timeout` s."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.05)
        return bool(predicate())

    def log_tail(self, n: int = 40) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text().splitlines()[-n:])

    def close(self) -> None:
        if self.group_alive():
            os.killpg(self.pgid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._log.close()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.stdout_lines.put(line.rstrip("\n"))


@contextmanager
def serving(args: list[str], log_path: Path, timeout: float = 180.0) -> Iterator[ServerProcess]:
    """A ready `ddtune serve --port 0 ARGS`; its process group is killed on the way out."""
    server = ServerProcess(args, log_path)
    try:
        yield server.wait_ready(timeout)
    finally:
        server.close()


def setup_fake_systemd(base: Path, setenv) -> tuple[Path, Any]:
    """Install FAKE systemctl/journalctl under `base`, put them first on PATH via `setenv`.

    Returns (root, install_unit(name, exec_start, extra)).
    """
    spec = importlib.util.spec_from_file_location(
        "fake_systemd", Path(__file__).parent / "services" / "fake_systemd.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    root, bin_dir = base / "systemd", base / "bin"
    module.install(bin_dir, root)
    setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    setenv("FAKE_SYSTEMD_ROOT", str(root))

    def install_unit(name: str, exec_start: str, extra: str = "TimeoutStopSec=2\n") -> None:
        unit = f"[Unit]\nDescription=fake\n[Service]\nType=simple\nExecStart={exec_start}\n{extra}"
        (root / "units" / name).write_text(unit)
        subprocess.run(["systemctl", "daemon-reload"], check=True)  # what boot would have done

    return root, install_unit


@pytest.fixture(scope="session")
def random_engines(tmp_path_factory):
    """random_engines(family, block_size, context=512) -> (target dir, drafter dir, Engine):
    a vocab-8 random checkpoint in float64 (T=0 ties never flip between paths), cached."""
    made: dict[tuple[str, int, int], tuple[Path, Path, Any]] = {}

    def get(family: str = "qwen3", block_size: int = 4, context: int = 512):  # noqa: ANN202
        import torch

        from ddtune.ddtree.engine import Engine
        from ddtune.ddtree.testing import write_random_checkpoint

        key = (family, block_size, context)
        if key not in made:
            folder = tmp_path_factory.mktemp(f"{family}-b{block_size}-c{context}")
            target, drafter = write_random_checkpoint(
                folder,
                family=family,
                seed=block_size,
                std=0.3,
                vocab_size=8,
                num_layers=2,
                block_size=block_size,
                max_position_embeddings=context,
            )
            made[key] = (target, drafter, Engine.load(target, drafter, dtype=torch.float64))
        return made[key]

    return get


@pytest.fixture(scope="session")
def common() -> SimpleNamespace:
    """The helpers above (importlib mode: conftest is not importable)."""
    return SimpleNamespace(
        serve_argv=serve_argv,
        serve_args=serve_args,
        ServerProcess=ServerProcess,
        serving=serving,
        setup_fake_systemd=setup_fake_systemd,
    )


@pytest.fixture
def fake_systemd(tmp_path, monkeypatch):
    """FAKE systemctl/journalctl on PATH for one test; returns (root, install_unit)."""
    return setup_fake_systemd(tmp_path, monkeypatch.setenv)
