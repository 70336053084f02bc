"""Live-server fixtures: a random tiny checkpoint and `ddtune serve` subprocesses on loopback.

`ServerProcess` starts `ddtune serve --port 0` in its own process group,
waits for the single `ready instance_id=... port=...` stdout line, and on
close kills whatever is left of the group, so no test leaves a process behind.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
SERVER_ENV = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(target_dir, drafter_dir): random weights, char tokenizer, a jinja chat template."""
    from ddtune.engine.testing import ALPHABET, write_random_checkpoint

    folder = tmp_path_factory.mktemp("server-ckpt")
    target, drafter = write_random_checkpoint(
        folder, seed=3, vocab_size=len(ALPHABET) + 2, max_position_embeddings=2048
    )
    config = {"chat_template": CHAT_TEMPLATE, "eos_token": "<|endoftext|>"}
    (target / "tokenizer_config.json").write_text(json.dumps(config))
    return target, drafter


class ServerProcess:
    """One `ddtune serve` subprocess; `close()` leaves nothing running."""

    def __init__(self, args: list[str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ddtune.cli", "serve", "--port", "0", *args],
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


def start_server(args: list[str], log_path: Path) -> ServerProcess:
    server = ServerProcess(args, log_path)
    try:
        return server.wait_ready()
    except BaseException:
        server.close()
        raise


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator:
    """`start(args, wait=True)` for tests that stop their own server; all closed at teardown."""
    started: list[ServerProcess] = []

    def start(args: list[str], wait: bool = True) -> ServerProcess:
        proc = ServerProcess(args, tmp_path / f"serve-{len(started)}.log")
        started.append(proc)
        return proc.wait_ready() if wait else proc

    yield start
    for proc in started:
        proc.close()


@pytest.fixture(scope="session")
def server(
    checkpoint: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """One DDTree server shared by the app and generation tests (tests restore its config)."""
    target, drafter = checkpoint
    log = tmp_path_factory.mktemp("serve-log") / "serve.log"
    args = [
        "--target",
        str(target),
        "--drafter",
        str(drafter),
        "--mode",
        "ddtree",
        "--budget",
        "8",
        "--topk",
        "3",
        "--model-name",
        "tiny",
        "--max-queue",
        "64",
    ]
    proc = start_server(args, log)
    yield proc
    proc.close()


GUARD_LIMIT = 1_000_000  # = hostile_cases.LIMIT
GUARD_TIMEOUT = 2.0


@pytest.fixture(scope="session")
def guarded_server(
    checkpoint: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A DDTree server with a 1 MB body limit and a 2 s body deadline (the limits tests)."""
    target, drafter = checkpoint
    log = tmp_path_factory.mktemp("guarded-log") / "serve.log"
    args = ["--target", str(target), "--drafter", str(drafter), "--model-name", "tiny"]
    limits = ["--max-request-bytes", str(GUARD_LIMIT), "--body-timeout-seconds", str(GUARD_TIMEOUT)]
    proc = start_server([*args, *limits], log)
    yield proc
    proc.close()
