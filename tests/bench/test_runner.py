"""run_bench end to end against loopback servers speaking ddtune, SGLang, vLLM and plain OpenAI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddtune.bench import BenchError, BenchMatrix, BenchResult, compare_outputs, run_bench
from ddtune.bench.coding import read_tasks
from ddtune.records import METRIC_NAMES

SMALL = {
    "warmup": 2,
    "short": {"n_prompts": 2, "max_tokens": 8, "repeats": 2},
    "long": {"n_prompts": 1, "max_tokens": 10, "repeats": 1},
}


def matrix(coding: dict | None = None, **extra) -> BenchMatrix:
    return BenchMatrix.from_dict({**SMALL, "coding": coding or {"enabled": False}, **extra})


def test_ddtune_run_samples_aggregates_and_requests(fake_server_cls) -> None:
    with fake_server_cls(kind="ddtune", tokens_per_round=3) as server:
        result = run_bench(server.url, matrix(), engine="ddtune", progress=False)
        bodies = [b for b in server.bodies if b.get("stream")]
        gap_bodies = [b for b in server.bodies if not b.get("stream")]
    assert len(bodies) == 2 + 4 + 1  # warmup + short (2 prompts x 2 repeats) + long
    # T=0 on a logprobs-capable kind: one non-streamed top-2 request per measured request
    assert [b["logprobs"] for b in gap_bodies] == [2] * 5
    assert result.logprob_gaps is not None and len(result.logprob_gaps) == 5
    first = result.logprob_gaps[0]
    assert first is not None and first["gaps"] == [0.5 * i for i in range(8)]
    assert first["agree"] == len(result.outputs[0]) and len(first["offsets"]) == 8
    assert all(b["ignore_eos"] and b["stream_options"] == {"include_usage": True} for b in bodies)
    assert {b["model"] for b in bodies} == {"fake-model"}  # discovered from /v1/models
    assert [(s["workload"], s["index"]) for s in result.samples] == [
        ("short", 0),
        ("short", 1),
        ("short", 2),
        ("short", 3),
        ("long", 0),
    ]
    assert [s["output_tokens"] for s in result.samples] == [8, 8, 8, 8, 10]
    assert all(
        s["ttft_s"] > 0 and s["decode_tps"] > 0 and s["e2e_s"] >= s["ttft_s"]
        for s in result.samples
    )
    assert set(METRIC_NAMES) <= set(result.aggregates)
    # 8 tokens in rounds of 3,3,2 -> 3 rounds; 10 tokens -> 4 rounds; pooled: 42 tokens / 16 rounds
    assert result.aggregates["acceptance_length"] == pytest.approx(42 / 16)
    # each workload pooled on its own: short 4 x 8 tokens / 4 x 3 rounds, long 10 / 4
    assert result.aggregates["short_acceptance_length"] == pytest.approx(32 / 12)
    assert result.aggregates["long_acceptance_length"] == pytest.approx(10 / 4)
    assert result.aggregates["coding_acceptance_length"] is None  # no coding requests
    assert result.aggregates["coding_tps"] is None
    assert result.acceptance_source == "usage.spec"
    assert result.aggregates["coding_total"] == 0
    assert (
        result.identity["_source"] == "/server_info"
        and result.identity["instance_id"] == "fake-instance"
    )
    assert result.outputs == [s["text"] for s in result.samples]
    assert result.hardware_fingerprint == result.hardware["fingerprint"]


def test_logprob_gaps_can_be_switched_off(fake_server_cls) -> None:
    with fake_server_cls(kind="ddtune") as server:
        result = run_bench(server.url, matrix(logprob_gaps=False), engine="ddtune", progress=False)
        asked = [b for b in server.bodies if not b.get("stream")]
    assert asked == [] and result.logprob_gaps is None


def test_result_json_round_trip(fake_server_cls, tmp_path: Path) -> None:
    with fake_server_cls() as server:
        result = run_bench(server.url, matrix(), progress=False, identity={"instance_id": "given"})
    path = tmp_path / "result.json"
    result.save(path)
    again = BenchResult.read(path)
    assert again == result and again.identity == {"instance_id": "given"}
    assert BenchResult.from_dict(json.loads(path.read_text())).to_dict() == result.to_dict()
    assert BenchMatrix.from_dict(again.matrix) == matrix()


def test_same_server_twice_is_identical_a_lossy_one_diverges(fake_server_cls) -> None:
    with fake_server_cls() as server:
        first = run_bench(server.url, matrix(), progress=False)
        second = run_bench(server.url, matrix(), progress=False)
    with fake_server_cls(salt="lossy") as server:
        lossy = run_bench(server.url, matrix(), progress=False)
    assert first.prompt_set_hash == second.prompt_set_hash == lossy.prompt_set_hash
    assert compare_outputs(first.outputs, second.outputs).identical
    verdict = compare_outputs(first.outputs, lossy.outputs)
    assert (
        not verdict.identical
        and verdict.request == 0
        and verdict.detail.startswith("diverged at request 0")
    )


def test_vllm_acceptance_diffs_counters_around_the_measured_requests(fake_server_cls) -> None:
    with fake_server_cls(kind="vllm", tokens_per_round=4) as server:
        result = run_bench(server.url, matrix(warmup=3), engine="vllm", progress=False)
    # warmup requests also advance the counters; only the measured ones count:
    # 8 tokens -> 2 rounds (6 accepted); 10 tokens -> 3 rounds (7 accepted)
    drafts, accepted = 4 * 2 + 3, 4 * 6 + 7
    assert result.aggregates["acceptance_length"] == pytest.approx(1 + accepted / drafts)
    assert result.acceptance_source == "prometheus"
    assert all(s["acceptance_length"] is None for s in result.samples)


def test_vllm_counters_give_each_context_length_its_own_acceptance(fake_server_cls) -> None:
    """What a predicting race corrects per workload: short and long each their own tau."""
    with fake_server_cls(kind="vllm", tokens_per_round=4) as server:
        result = run_bench(server.url, matrix(), engine="vllm", progress=False)
    # short: 4 requests of 8 tokens, 2 rounds each (tau 4); long: 10 tokens in 3 rounds
    assert result.aggregates["short_acceptance_length"] == pytest.approx(4.0)
    assert result.aggregates["long_acceptance_length"] == pytest.approx(10 / 3)


def test_sglang_acceptance_from_meta_info(fake_server_cls) -> None:
    with fake_server_cls(kind="sglang", tokens_per_round=4) as server:
        result = run_bench(server.url, matrix(), engine="sglang", progress=False)
        assert all(b["path"] == "/generate" for b in server.bodies)
    assert result.aggregates["acceptance_length"] == pytest.approx((4 * 8 + 10) / (4 * 2 + 3))
    assert [s["acceptance_length"] for s in result.samples][:1] == [pytest.approx(4.0)]
    assert result.identity["_source"] == "/get_model_info"


def test_openai_server_acceptance_unavailable(fake_server_cls) -> None:
    with fake_server_cls(kind="openai") as server:
        result = run_bench(server.url, matrix(), engine="openai", progress=False)
    assert result.aggregates["acceptance_length"] is None and result.acceptance_source is None
    assert any("unavailable" in note for note in result.notes)


def test_coding_workload_runs_tests(fake_server_cls, fixtures_dir: Path) -> None:
    tasks = read_tasks(fixtures_dir / "tasks.jsonl")
    completions = {t.prompt: t.canonical_solution for t in tasks[:3]}
    completions[tasks[3].prompt] = "    return 0\n"  # wrong for count_big
    coding = {"tasks_file": str(fixtures_dir / "tasks.jsonl"), "max_tokens": 64, "n_samples": 2}
    with fake_server_cls(completions=completions) as server:
        result = run_bench(
            server.url,
            matrix(coding, short={"enabled": False}, long={"enabled": False}),
            progress=False,
        )
        coding_bodies = [
            b for b in server.bodies if "\ndef " in b.get("stop", []) and b.get("stream")
        ]
    assert len(coding_bodies) == 8 and {b["seed"] for b in coding_bodies} == {0, 1}
    rows = [s for s in result.samples if s["workload"] == "coding"]
    assert [(r["task_id"], r["sample"]) for r in rows][:3] == [
        ("fx/0", 0),
        ("fx/0", 1),
        ("fx/1", 0),
    ]
    assert result.aggregates["coding_passed"] == 6 and result.aggregates["coding_total"] == 8
    assert result.aggregates["coding_tps"] > 0 and result.aggregates["short_tps"] is None
    assert result.aggregates["pass_at_1"] == pytest.approx(0.75)
    assert result.aggregates["pass_at_2"] == pytest.approx(0.75)
    failed = [r for r in rows if not r["passed"]]
    assert {r["task_id"] for r in failed} == {"fx/3"} and {r["fail_reason"] for r in failed} == {
        "assertion"
    }


def test_concurrency_keeps_request_order(fake_server_cls) -> None:
    with fake_server_cls(delay_s=0.005) as server:
        serial = run_bench(server.url, matrix(), progress=False)
        parallel = run_bench(server.url, matrix(concurrency=3), progress=True)
    assert parallel.outputs == serial.outputs
    assert parallel.prompts == serial.prompts and len(parallel.prompts["short"]) == 2


def test_failed_request_raises(fake_server_cls) -> None:
    with fake_server_cls(fail_request=3) as server, pytest.raises(BenchError, match="HTTP 500"):
        run_bench(server.url, matrix(), progress=False)


def test_all_workloads_disabled_is_a_user_error(fake_server_cls) -> None:
    from ddtune.errors import UserError

    off = {"enabled": False}
    with (
        fake_server_cls() as server,
        pytest.raises(UserError, match="every bench workload is disabled"),
    ):
        run_bench(server.url, matrix(short=off, long=off), progress=False)


def test_a_counting_kind_gets_each_workloads_acceptance_from_its_own_counters(
    fake_server_cls, tmp_path: Path
) -> None:
    """vLLM counts acceptance on the server: the counters are read around each workload."""
    traffic = tmp_path / "traffic.jsonl"
    traffic.write_text('{"prompt": "x = 1", "max_tokens": 4}\n{"prompt": "y", "max_tokens": 4}\n')
    bench = matrix(short={"n_prompts": 1, "max_tokens": 9, "repeats": 1}, long={"enabled": False})
    bench = BenchMatrix.from_dict({**bench.to_dict(), "traffic_file": str(traffic)})
    with fake_server_cls(kind="vllm", tokens_per_round=3) as server:
        result = run_bench(server.url, bench, engine="vllm", progress=False)
    # 9 tokens in rounds of 3: tau 3; 4 tokens in rounds of 3 + 1: tau 2
    assert result.workloads["bundled"]["acceptance_length"] == pytest.approx(3.0)
    assert result.workloads["traffic"]["acceptance_length"] == pytest.approx(2.0)
    assert 2.0 < result.aggregates["acceptance_length"] < 3.0  # the run pools both
    assert [s["text"] for s in result.samples if s["workload"] == "traffic"] == ["", ""]
