"""Fixtures for the sweep tests: a random tiny checkpoint, one coding task, a free port,
spec writers whose service is a real `ddtune serve` or the fake fault server, and
`spec_text`, the TOML pieces the spec writers here and below share: a [service]
table for specs that are parsed but never run, a tiny [bench], a [retry]."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ddtune.sweep.spec.parse import SweepSpec

TASK = {
    "task_id": "tiny/0",
    "prompt": "def add(a, b):\n",
    "entry_point": "add",
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n",
    "canonical_solution": "    return a + b\n",
}


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> tuple[Path, Path]:
    from ddtune.ddtree.testing import write_random_checkpoint

    return write_random_checkpoint(tmp_path_factory.mktemp("models"), seed=0)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def port() -> int:
    return free_port()


SERVICE = """
[service]
command = ["python", "-m", "ddtune.cli", "serve", "--port", "{port}", "--mode", "{mode}",
           "--budget", "{budget}", "--topk", "{topk}", "--window", "{window}"]
port = 18000
"""
Sizes = tuple[int, int, int]  # a workload's n_prompts, prompt_tokens, max_tokens


def spec_toml(body: str, service: str = "") -> str:
    """`body` (dedented), then a [service] table of `ddtune serve` with `service` lines added."""
    return textwrap.dedent(body) + SERVICE + service


def parse_toml(body: str, service: str = "") -> SweepSpec:
    """`spec_toml(body, service)` parsed as the sweep spec `t.toml`."""
    from ddtune.sweep.plan import parse_spec

    return parse_spec(spec_toml(body, service), source="t.toml")


def bench_tables(
    warmup: int, short: Sizes, long: Sizes | None, coding: str = "enabled = false"
) -> str:
    """A tiny [bench]: short and long workloads of one repeat each (None: disabled), then
    [bench.coding] with the `coding` lines."""
    text = f"[bench]\nwarmup = {warmup}\nchars_per_token = 1.0\n"
    for name, sizes in (("short", short), ("long", long)):
        text += f"[bench.{name}]\n" + (_workload(*sizes) if sizes else "enabled = false\n")
    return text + f"[bench.coding]\n{textwrap.dedent(coding).strip()}\n"


def _workload(n_prompts: int, prompt_tokens: int, max_tokens: int) -> str:
    return (
        f"n_prompts = {n_prompts}\nprompt_tokens = {prompt_tokens}\n"
        f"max_tokens = {max_tokens}\nrepeats = 1\n"
    )


def retry_table(attempts: int) -> str:
    """[retry]: `attempts` tries a trial, no backoff."""
    return f"[retry]\nattempts = {attempts}\nbackoff = 0\n"


@pytest.fixture(scope="session")
def spec_text() -> SimpleNamespace:
    """The TOML pieces above (importlib mode: conftest is not importable)."""
    return SimpleNamespace(
        service=SERVICE,
        toml=spec_toml,
        parse=parse_toml,
        bench=bench_tables,
        retry=retry_table,
        free_port=free_port,
    )


@pytest.fixture(scope="session")
def spec_writer():
    return write_spec


def write_spec(
    folder: Path,
    models: tuple[Path, Path],
    sweep: str,
    configs: str,
    attempts: int = 1,
    service: str = "",
) -> Path:
    """A sweep spec against `ddtune serve` on the tiny checkpoint, with a tiny bench.

    `{queue}` (the server's --max-queue) lets a config crash the server on purpose:
    `vars = { queue = "bogus" }` makes `ddtune serve` exit 2 on its arguments.
    `service` adds lines to the [service] table (e.g. `control = "hot"`).
    """
    (folder / "tasks.jsonl").write_text(json.dumps(TASK) + "\n")
    target, drafter = models
    text = textwrap.dedent(sweep).strip() + "\n\n" + textwrap.dedent(configs).strip() + "\n"
    text += textwrap.dedent(f"""
        [service]
        command = ["{{python}}", "-m", "ddtune.cli", "serve", "--target", "{{target}}",
                   "--drafter", "{{drafter}}", "--port", "{{port}}", "--mode", "{{mode}}",
                   "--budget", "{{budget}}", "--topk", "{{topk}}", "--window", "{{window}}",
                   "--max-queue", "{{queue}}"]
        port = {free_port()}
        generations = 1
        env = {{ OMP_NUM_THREADS = "1" }}  # contended torch worker threads spin: ~10x CPU
        vars = {{ target = "{target}", drafter = "{drafter}", queue = "64" }}
        """)
    text += textwrap.dedent(service).strip() + "\n"
    text += "[service.timeouts]\nstop = 10\nquiesce = 20\n\n"
    coding = 'tasks_file = "tasks.jsonl"\nlimit = 1\nmax_tokens = 8'
    text += bench_tables(1, (1, 20, 8), (1, 80, 8), coding) + "\n" + retry_table(attempts)
    path = folder / "spec.toml"
    path.write_text(text)
    return path


FAKE_SERVER = Path(__file__).parents[1] / "services" / "fake_fault_server.py"


@pytest.fixture(scope="session")
def fake_spec_writer():
    return write_fake_spec


def write_fake_spec(
    folder: Path,
    name: str,
    configs: str,
    port: int,
    service: str = "",
    attempts: int = 1,
    sweep: str = "repeats = 1",
    args: str = "",
    defaults: str = "",
) -> Path:
    """A sweep spec whose service is the FAKE fault server (stdlib, starts in ~0.1 s).

    `{delay}` is the server's --ready-delay: `vars = { delay = "bogus" }` makes it
    exit 2 on its arguments (crashed(2)); `delay = "60"` keeps it loading.
    `service` adds lines to the [service] table (e.g. `reclaim_leftovers = true`),
    `sweep` to the [sweep] table, `args` to the server's command (e.g.
    `"--token-delay", "{tok}"` with a `tok` variable per config: a known throughput)
    and `defaults` to [service.vars] (e.g. `tok = "0"`).
    """
    head = f'[sweep]\nname = "{name}"\n' + textwrap.dedent(sweep).strip() + "\n\n"
    text = head + textwrap.dedent(configs).strip()
    extra = f", {args}" if args else ""
    more_vars = f", {defaults}" if defaults else ""
    text += textwrap.dedent(f"""

        [service]
        command = ["{{python}}", "-S", "{FAKE_SERVER}", "--port", "{{port}}",
                   "--mode", "{{mode}}", "--budget", "{{budget}}", "--topk", "{{topk}}",
                   "--window", "{{window}}", "--ready-delay", "{{delay}}"{extra}]
        port = {port}
        generations = 1
        gpu = "off"
        vars = {{ delay = "0"{more_vars} }}
        """)
    text += textwrap.dedent(service).strip() + "\n"
    text += "[service.timeouts]\nstop = 5\nquiesce = 60\nstart = 60\nhealth = 120\n\n"
    text += bench_tables(0, (1, 20, 4), (1, 40, 4)) + "\n" + retry_table(attempts)
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


class Runners:
    """`ddtune sweep run` subprocesses; at teardown every runner and every server started
    for one of their stores is killed, so a failed assertion leaves nothing behind."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.workdirs: list[Path] = []

    def start(self, spec: Path, store: Path) -> subprocess.Popen:
        store.parent.mkdir(parents=True, exist_ok=True)
        self.workdirs.append(store.parent)
        cmd = [sys.executable, "-m", "ddtune.cli", "sweep", "run", str(spec), "--store", str(store)]
        with open(store.parent / "runner.log", "a") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    @staticmethod
    def wait_listening(port: int, timeout: float = 120.0) -> int:
        """The pid that listens on `port` once one does."""
        from ddtune.services import procs

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = [pid for pid in procs.port_listeners(port).values() if pid]
            if pids:
                return pids[0]
            time.sleep(0.1)
        raise AssertionError(f"nothing listened on port {port} within {timeout} s")

    def close(self) -> None:
        from ddtune.services import procs
        from ddtune.services.controllers.process import scope_prefix

        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for workdir in self.workdirs:
            for info in procs.find_instance(tag=scope_prefix(workdir), tag_prefix=True):
                os.kill(info.pid, signal.SIGKILL)


@pytest.fixture
def runners():
    made = Runners()
    yield made
    made.close()
