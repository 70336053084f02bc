"""Live-server fixtures: a random tiny checkpoint and `ddtune serve` subprocesses on loopback.

The subprocesses are the top-level conftest's `ServerProcess` (`common`): each starts
`ddtune serve --port 0` in its own process group, waits for the single
`ready instance_id=... port=...` stdout line, and on close kills whatever is left of
the group, so no test leaves a process behind.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(target_dir, drafter_dir): random weights, char tokenizer, a jinja chat template."""
    from ddtune.ddtree.testing import ALPHABET, write_random_checkpoint

    folder = tmp_path_factory.mktemp("server-ckpt")
    target, drafter = write_random_checkpoint(
        folder, seed=3, vocab_size=len(ALPHABET) + 2, max_position_embeddings=2048
    )
    config = {"chat_template": CHAT_TEMPLATE, "eos_token": "<|endoftext|>"}
    (target / "tokenizer_config.json").write_text(json.dumps(config))
    return target, drafter


@pytest.fixture
def server_factory(tmp_path: Path, common) -> Iterator:  # noqa: ANN001 - the helper namespace
    """`start(args, wait=True)` for tests that stop their own server; all closed at teardown."""
    started = []

    def start(args: list[str], wait: bool = True):
        proc = common.ServerProcess(args, tmp_path / f"serve-{len(started)}.log")
        started.append(proc)
        return proc.wait_ready() if wait else proc

    yield start
    for proc in started:
        proc.close()


@pytest.fixture(scope="session")
def server(
    checkpoint: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory, common
) -> Iterator:  # noqa: ANN001 - the helper namespace
    """One DDTree server shared by the app and generation tests (tests restore its config)."""
    log = tmp_path_factory.mktemp("serve-log") / "serve.log"
    flags = {"mode": "ddtree", "budget": 8, "topk": 3, "model_name": "tiny", "max_queue": 64}
    with common.serving(common.serve_args(*checkpoint, **flags), log) as proc:
        yield proc


GUARD_LIMIT = 1_000_000  # = hostile_cases.LIMIT
GUARD_TIMEOUT = 2.0


@pytest.fixture(scope="session")
def guarded_server(
    checkpoint: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory, common
) -> Iterator:  # noqa: ANN001 - the helper namespace
    """A DDTree server with a 1 MB body limit and a 2 s body deadline (the limits tests)."""
    log = tmp_path_factory.mktemp("guarded-log") / "serve.log"
    limits = {"max_request_bytes": GUARD_LIMIT, "body_timeout_seconds": GUARD_TIMEOUT}
    with common.serving(common.serve_args(*checkpoint, model_name="tiny", **limits), log) as proc:
        yield proc
