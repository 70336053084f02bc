"""The suites and the traffic against a live `ddtune serve` with the bundled models.

MT-Bench runs as a real two-turn chat (the second request carries the server's own first
answer), agent sessions are cut to the context the server reports, HumanEval's answers are
tested in the sandbox, the traffic is replayed at its own endpoints, and every workload gets
its own figures; DDTree and AR give the same T=0 outputs on every workload.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ddtune.assets import MODELS_DIR
from ddtune.bench import BenchMatrix, compare_outputs, run_bench

TRAFFIC = [
    {"prompt": "def fib(n):", "max_tokens": 12, "temperature": 0},
    {"messages": [{"role": "user", "content": "Sort a list in Python"}], "max_tokens": 10},
]


@pytest.fixture(scope="module")
def bundled_server(tmp_path_factory: pytest.TempPathFactory, common) -> Iterator[str]:  # noqa: ANN001
    if not (MODELS_DIR / "target" / "config.json").is_file():
        pytest.fail("the bundled models are missing (src/ddtune/assets/models)")
    folder = tmp_path_factory.mktemp("suites-live")
    args = common.serve_args(
        MODELS_DIR / "target", MODELS_DIR / "drafter", mode="ddtree", budget=8, topk=4
    )
    with common.serving(args, folder / "serve.log") as server:
        yield server.base_url


def matrix(tmp_path: Path) -> BenchMatrix:
    traffic = tmp_path / "traffic.jsonl"
    traffic.write_text("\n".join(json.dumps(b) for b in TRAFFIC) + "\n")
    return BenchMatrix.from_dict(
        {
            "warmup": 1,
            "logprob_gaps": False,
            "suite": ["humaneval", "mt-bench", "gsm8k", "agent-sessions"],
            "traffic_file": str(traffic),
            "suites": {
                "humaneval": {"limit": 2, "max_tokens": 32},
                "mt-bench": {"limit": 1, "max_tokens": 16},
                "gsm8k": {"limit": 2, "max_tokens": 24},
                "agent-sessions": {"limit": 1, "max_tokens": 16},
            },
        }
    )


def test_every_workload_runs_against_the_real_server(bundled_server: str, tmp_path: Path) -> None:
    bench = matrix(tmp_path)
    ddtree = run_bench(bundled_server, bench, progress=False)
    assert list(ddtree.workloads) == ["humaneval", "mt-bench", "gsm8k", "agent-sessions", "traffic"]
    chat = [s for s in ddtree.samples if s["workload"] == "mt-bench"]
    assert [s["turn"] for s in chat] == [1, 2]
    # the second turn carries the first answer: more prompt tokens than the first turn had
    assert chat[1]["prompt_tokens"] > chat[0]["prompt_tokens"] + chat[0]["output_tokens"] // 2
    agent = next(s for s in ddtree.samples if s["workload"] == "agent-sessions")
    assert 0 < agent["prompt_tokens"] <= 512 - 16  # cut to the bundled model's context
    tested = [s for s in ddtree.samples if s["workload"] == "humaneval"]
    assert all(s["passed"] is not None and s["test_s"] is not None for s in tested)
    assert ddtree.workloads["gsm8k"]["total"] == 2 and ddtree.workloads["mt-bench"]["total"] is None
    traffic = [s for s in ddtree.samples if s["workload"] == "traffic"]
    assert [s["text"] for s in traffic] == ["", ""] and all(s["prompt_sha256"] for s in traffic)
    assert all(
        w["acceptance_length"] and w["acceptance_length"] >= 1 for w in ddtree.workloads.values()
    )
    assert ddtree.aggregates["mix_tps"] and ddtree.aggregates["mix_tps"] > 0
    assert set(ddtree.suites) == {"humaneval", "mt-bench", "gsm8k", "agent-sessions"}

    httpx.post(f"{bundled_server}/v1/ddtree/config", json={"mode": "ar"}).raise_for_status()
    try:
        ar = run_bench(bundled_server, bench, progress=False)
    finally:
        httpx.post(f"{bundled_server}/v1/ddtree/config", json={"mode": "ddtree"}).raise_for_status()
    assert compare_outputs(ar.outputs, ddtree.outputs).identical
    assert ar.prompt_set_hash == ddtree.prompt_set_hash
