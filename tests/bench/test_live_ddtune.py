"""run_bench against a live `ddtune serve` subprocess (random tiny checkpoint, loopback).

The same prompts in DDTree mode and, after a hot reconfigure, in plain AR mode
must give identical T=0 outputs (DDTree is lossless), and acceptance length
comes from the server's `usage.spec`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ddtune.assets import MODELS_DIR
from ddtune.bench import BenchMatrix, compare_outputs, run_bench

MATRIX = {
    "warmup": 1,
    "chars_per_token": 1.0,  # the test checkpoint's tokenizer is character-level
    "short": {"n_prompts": 2, "prompt_tokens": 60, "max_tokens": 12, "repeats": 1},
    "long": {"n_prompts": 1, "prompt_tokens": 300, "max_tokens": 12, "repeats": 1},
    "coding": {"limit": 2, "max_tokens": 16, "timeout_s": 5.0},
}


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory, common) -> Iterator[str]:  # noqa: ANN001
    """`ddtune serve` (DDTree, budget 8, topk 3) on a random checkpoint; yields its base URL."""
    from ddtune.ddtree.testing import ALPHABET, write_random_checkpoint

    folder = tmp_path_factory.mktemp("bench-live")
    target, drafter = write_random_checkpoint(
        folder, seed=5, vocab_size=len(ALPHABET) + 2, max_position_embeddings=2048
    )
    args = common.serve_args(target, drafter, mode="ddtree", budget=8, topk=3)
    with common.serving(args, folder / "serve.log") as server:
        yield server.base_url


def test_live_ddtree_vs_ar_is_lossless(live_server: str, fixtures_dir: Path) -> None:
    matrix = BenchMatrix.from_dict(
        {**MATRIX, "coding": {**MATRIX["coding"], "tasks_file": str(fixtures_dir / "tasks.jsonl")}}
    )
    tree = run_bench(live_server, matrix, engine="ddtune", progress=False)
    assert (
        tree.identity["_source"] == "/server_info" and tree.identity["config"]["mode"] == "ddtree"
    )
    al = tree.aggregates["acceptance_length"]
    assert al is not None and 1.0 <= al <= 16.0 and tree.acceptance_source == "usage.spec"
    assert [s["output_tokens"] for s in tree.samples if s["workload"] != "coding"] == [12, 12, 12]
    assert all(
        s["ttft_s"] > 0 and s["decode_tps"] > 0 for s in tree.samples if s["workload"] != "coding"
    )
    assert tree.aggregates["coding_total"] == 2
    coding = [s for s in tree.samples if s["workload"] == "coding"]
    assert all(s["passed"] or s["fail_reason"] for s in coding)

    response = httpx.post(f"{live_server}/v1/ddtree/config", json={"mode": "ar"}, timeout=60)
    assert response.status_code == 200, response.text
    plain = run_bench(live_server, matrix, engine="ddtune", progress=False)
    assert plain.identity["config"]["mode"] == "ar"
    assert plain.prompt_set_hash == tree.prompt_set_hash
    verdict = compare_outputs(plain.outputs, tree.outputs)
    assert verdict.identical, verdict.detail
    # T=0 on ddtune serve: one logit-gap entry per measured request, same gaps in both modes
    for result in (tree, plain):
        assert result.logprob_gaps is not None
        assert len(result.logprob_gaps) == len(result.samples)
        for entry, text in zip(result.logprob_gaps, result.outputs, strict=True):
            assert entry is not None and entry["agree"] == len(text)
            assert len(entry["offsets"]) == len(entry["gaps"]) >= 1
            assert all(g is None or g >= 0 for g in entry["gaps"])
    short = tree.logprob_gaps[0]["gaps"], plain.logprob_gaps[0]["gaps"]
    assert short[0] == pytest.approx(short[1], abs=1e-3)


@pytest.mark.slow
@pytest.mark.skipif(
    not (MODELS_DIR / "target" / "config.json").is_file(), reason="bundled models not trained yet"
)
def test_live_bundled_models_default_matrix(tmp_path: Path, common) -> None:  # noqa: ANN001
    """The default matrix fits the bundled model's context, and its drafter gets accepted."""
    with common.serving([], tmp_path / "serve.log") as server:
        result = run_bench(server.base_url, BenchMatrix(), engine="ddtune", progress=False)
        assert result.aggregates["acceptance_length"] > 1.0
        assert result.aggregates["coding_total"] == BenchMatrix().coding.limit
        assert all(s["prompt_tokens"] + s["output_tokens"] <= 512 for s in result.samples)


def test_alternated_arms_take_turns_and_a_wrong_fingerprint_stops_only_its_arm(
    live_server: str, fixtures_dir: Path
) -> None:
    """`run_alternated`: request r of every arm before r + 1 of any, each under its config."""
    from ddtune.bench.alternate import Arm, run_alternated

    matrix = BenchMatrix.from_dict(
        {**MATRIX, "coding": {**MATRIX["coding"], "tasks_file": str(fixtures_dir / "tasks.jsonl")}}
    )
    configs = [{"mode": "ar"}, {"mode": "ddtree", "budget": 4, "topk": 2}, {"mode": "dflash"}]

    def switch_to(config: dict, lie: bool = False):
        def switch() -> str:
            reply = httpx.post(f"{live_server}/v1/ddtree/config", json=config, timeout=60)
            assert reply.status_code == 200, reply.text
            return "ddtune-not-this-one" if lie else reply.json()["system_fingerprint"]

        return switch

    arms = [Arm(switch_to(c)) for c in configs[:2]] + [Arm(switch_to(configs[2], lie=True))]
    run_alternated(live_server, matrix, "ddtune", arms)
    honest, liar = arms[:2], arms[2]
    assert liar.result is None and "FingerprintMismatch" in (liar.error or "")
    assert all(a.error is None and a.result is not None for a in honest)
    assert honest[0].result.outputs == honest[1].result.outputs  # lossless, T=0
    rows = sorted(
        ((s["sent_at"], i, s) for i, a in enumerate(honest) for s in a.result.samples),
        key=lambda row: row[0],
    )
    turns = [rows[k : k + 2] for k in range(0, len(rows), 2)]
    for turn in turns:  # both arms send request r, then both send r + 1
        assert {i for _, i, _ in turn} == {0, 1}
        assert len({(s["workload"], s["index"]) for _, _, s in turn}) == 1
    generations = [int(s["fingerprint"].rsplit("-g", 1)[1]) for _, _, s in rows]
    assert generations == sorted(set(generations))  # a switch of its own before every request
    hashes = [{s["fingerprint"].rsplit("-g", 1)[0] for s in a.result.samples} for a in honest]
    assert all(len(h) == 1 for h in hashes) and hashes[0] != hashes[1]  # one config per arm
    for arm, config in zip(honest, configs[:2], strict=True):  # the identity under its own config
        assert arm.result.identity["config"]["mode"] == config["mode"] and arm.seconds > 0
        assert arm.result.identity["target_sha256"]


def test_token_paths_are_the_streamed_answers_and_probes_time_each_length(
    live_server: str,
) -> None:
    """`[bench] token_paths` / `forward_probes`: each short and long request's prompt and T = 0
    answer ids (once per request, however often it repeats), decoding back to the streamed
    text; three timed one-token completions per probed length."""
    matrix = BenchMatrix.from_dict(
        {
            **MATRIX,
            "short": {**MATRIX["short"], "repeats": 2},
            "coding": {"enabled": False},
            "token_paths": True,
            "forward_probes": [1, 4, 16],
        }
    )
    result = run_bench(live_server, matrix, engine="ddtune", progress=False)
    paths = result.token_paths
    assert paths is not None and [p["workload"] for p in paths] == ["short", "short", "long"]
    assert [p["count"] for p in paths] == [2, 2, 1]  # short repeats twice: one path each
    # 16 tokens past max_tokens: what a last round that drafts past the answer's end sees
    assert all(len(p["output_ids"]) == 12 + 16 and len(p["prompt_ids"]) > 50 for p in paths)
    assert all(p["max_tokens"] == 12 for p in paths)
    streamed = [s["text"] for s in result.samples if s["workload"] == "long"]
    reply = httpx.post(
        f"{live_server}/v1/completions",
        json={"prompt": paths[-1]["output_ids"], "max_tokens": 1, "echo": True},
        timeout=60,
    ).json()
    assert reply["choices"][0]["text"].startswith(streamed[0])  # the ids are the answer's
    probes = result.forward_probes
    assert probes is not None and [p["tokens"] for p in probes] == [1] * 3 + [4] * 3 + [16] * 3
    assert all(p["seconds"] > 0 for p in probes)
    assert not any("missing" in n or "not measured" in n for n in result.notes)


def test_token_paths_above_t0_are_a_note_not_a_guess(live_server: str) -> None:
    matrix = BenchMatrix.from_dict(
        {**MATRIX, "coding": {"enabled": False}, "temperature": 0.7, "token_paths": True}
    )
    result = run_bench(live_server, matrix, engine="ddtune", progress=False)
    assert result.token_paths is None and result.forward_probes is None
    assert "token paths and forward probes not measured: T > 0" in result.notes


def test_the_server_refuses_token_ids_on_a_stream(live_server: str) -> None:
    body = {"prompt": "ab", "max_tokens": 2, "stream": True, "return_token_ids": True}
    reply = httpx.post(f"{live_server}/v1/completions", json=body, timeout=60)
    assert reply.status_code == 400 and "return_token_ids" in reply.text
