"""Fixtures for the sweep's end-to-end tests: a random tiny checkpoint, one coding
task, a free port, and a spec writer whose service is a real `ddtune serve`."""

from __future__ import annotations

import json
import socket
import textwrap
from pathlib import Path

import pytest

TASK = {
    "task_id": "tiny/0",
    "prompt": "def add(a, b):\n",
    "entry_point": "add",
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n",
    "canonical_solution": "    return a + b\n",
}


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> tuple[Path, Path]:
    from ddtune.engine.testing import write_random_checkpoint

    return write_random_checkpoint(tmp_path_factory.mktemp("models"), seed=0)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def spec_writer():
    return write_spec


def write_spec(
    folder: Path, models: tuple[Path, Path], sweep: str, configs: str, attempts: int = 1
) -> Path:
    """A sweep spec against `ddtune serve` on the tiny checkpoint, with a tiny bench.

    `{queue}` (the server's --max-queue) lets a config crash the server on purpose:
    `vars = { queue = "bogus" }` makes `ddtune serve` exit 2 on its arguments.
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
        [service.timeouts]
        stop = 10
        quiesce = 20

        [bench]
        warmup = 1
        chars_per_token = 1.0
        [bench.short]
        n_prompts = 1
        prompt_tokens = 20
        max_tokens = 8
        repeats = 1
        [bench.long]
        n_prompts = 1
        prompt_tokens = 80
        max_tokens = 8
        repeats = 1
        [bench.coding]
        tasks_file = "tasks.jsonl"
        limit = 1
        max_tokens = 8

        [retry]
        attempts = {attempts}
        backoff = 0
        """)
    path = folder / "spec.toml"
    path.write_text(text)
    return path


FAKE_SERVER = Path(__file__).parents[1] / "services" / "fake_fault_server.py"


@pytest.fixture(scope="session")
def fake_spec_writer():
    return write_fake_spec


def write_fake_spec(
    folder: Path, name: str, configs: str, port: int, service: str = "", attempts: int = 1
) -> Path:
    """A sweep spec whose service is the FAKE fault server (stdlib, starts in ~0.1 s).

    `{delay}` is the server's --ready-delay: `vars = { delay = "bogus" }` makes it
    exit 2 on its arguments (crashed(2)); `delay = "60"` keeps it loading.
    `service` adds lines to the [service] table (e.g. `reclaim_leftovers = true`).
    """
    text = f'[sweep]\nname = "{name}"\nrepeats = 1\n\n' + textwrap.dedent(configs).strip()
    text += textwrap.dedent(f"""

        [service]
        command = ["{{python}}", "-S", "{FAKE_SERVER}", "--port", "{{port}}",
                   "--mode", "{{mode}}", "--budget", "{{budget}}", "--topk", "{{topk}}",
                   "--window", "{{window}}", "--ready-delay", "{{delay}}"]
        port = {port}
        generations = 1
        gpu = "off"
        vars = {{ delay = "0" }}
        """)
    text += textwrap.dedent(service).strip() + "\n"
    text += textwrap.dedent(f"""
        [service.timeouts]
        stop = 5
        quiesce = 60
        start = 60
        health = 120

        [bench]
        warmup = 0
        chars_per_token = 1.0
        [bench.short]
        n_prompts = 1
        prompt_tokens = 20
        max_tokens = 4
        repeats = 1
        [bench.long]
        n_prompts = 1
        prompt_tokens = 40
        max_tokens = 4
        repeats = 1
        [bench.coding]
        enabled = false

        [retry]
        attempts = {attempts}
        backoff = 0
        """)
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path
