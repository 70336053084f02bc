"""Speed against AR on vLLM's CPU build, paired in time: one AR server stays up, each method's
server runs beside it, and the two take turns request by request on the same prompts.

    PYTHONPATH=src python benchmarks/vllm_paired_speed.py [--rounds 3] [--prompts 8]
        [--max-tokens 64] [--methods eagle3:1,eagle3:2,eagle3:3,eagle3:4,eagle3:5,dflash,ngram]

On a machine shared with other jobs, a pass measured minutes after another can run several
times slower (here: one AR pass 24 s, the next 4.5 s, for the same requests), so speeds from
separate starts do not compare. Here every request of a method is timed next to the same
request on plain AR (the order alternates each round), so a slowdown hits both: the ratio
per pair is AR's end-to-end seconds over the method's (the same number of tokens: EOS
ignored), and the figure is the geometric mean over all pairs with a 95 % t-interval
(pairs within a round are not independent: read it as a guide). tok/s = tokens / seconds
over the method's requests; τ (tokens per verify round, bonus included) from vLLM's
counters around its bench; T = 0 tokens compared with AR's.

Methods: `eagle3:K` (the bundled EAGLE-3 head, K draft tokens), `dflash` (the bundled
DFlash drafter, 7), `ngram` (4 tokens, lookup up to 3). Prompts: the first `--prompts`
held-out task prompts. Needs .venv-vllm; about 2 minutes per method on 2 shared cores.
Figures: docs/benchmarks.md "EAGLE-3 on vLLM".
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import mean, stdev
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "src" / "ddtune" / "assets" / "models"
VLLM_PY = REPO / ".venv-vllm" / "bin" / "python"
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228]  # df 1..10


def method_config(name: str) -> dict[str, Any]:
    """`eagle3:K`, `dflash` or `ngram` -> vLLM's speculative config."""
    from ddtune.engines.vllm import speculative_config

    if name.startswith("eagle3:"):
        return speculative_config("eagle3", int(name[7:]), draft_path=MODELS / "eagle3")
    if name == "dflash":
        return speculative_config("dflash", 7, draft_path=MODELS / "drafter")
    if name == "ngram":
        return speculative_config("ngram", 4, prompt_lookup_max=3)
    raise SystemExit(f"unknown method {name!r}: use eagle3:K, dflash or ngram")


def start(spec: dict[str, Any] | None, port: int, log: Path) -> subprocess.Popen[bytes]:
    from ddtune.engines.vllm import vllm_argv

    extra = ["--max-model-len", "512", "--dtype", "float32", "--max-num-seqs", "4"]
    argv, env = vllm_argv(
        MODELS / "target",
        spec,
        port,
        extra,
        python=str(VLLM_PY),
        served_model_name="target",
        cpu_kvcache_gib=1,
    )
    env = {**os.environ, **env, "VLLM_CPU_OMP_THREADS_BIND": "1", "HF_HUB_OFFLINE": "1"}
    with log.open("wb") as out:
        return subprocess.Popen(
            ["nice", "-n", "10", *argv],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=REPO,
        )


def wait_ready(proc: subprocess.Popen[bytes], url: str, deadline: float = 1500) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"vLLM at {url} exited with {proc.returncode}; see its log")
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(3)
    raise SystemExit(f"vLLM at {url} was not ready in {deadline:.0f} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=30)


def timed(client: httpx.Client, url: str, ids: list[int], max_tokens: int) -> tuple[float, list]:
    body = {
        "model": "target",
        "prompt": ids,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "return_token_ids": True,
    }
    began = time.perf_counter()
    reply = client.post(url + "/v1/completions", json=body).json()["choices"][0]
    return time.perf_counter() - began, reply["token_ids"]


def counters(client: httpx.Client, url: str) -> dict[str, float]:
    from ddtune.bench.acceptance import parse_prometheus

    return parse_prometheus(client.get(url + "/metrics").text)


def bench(ar: str, url: str, prompts: list[list[int]], rounds: int, max_tokens: int) -> dict:
    """Requests alternating between AR (`ar`) and the method (`url`), pair by pair."""
    from ddtune.engines.vllm import counter_acceptance

    logs, seconds, ar_seconds, same = [], 0.0, 0.0, True
    with httpx.Client(timeout=600) as client:
        for where in (ar, url):  # one warm-up request each, not timed
            timed(client, where, prompts[0], max_tokens)
        before = counters(client, url)
        for r in range(rounds):
            for ids in prompts:
                arms = [(ar, "ar"), (url, "m")] if r % 2 == 0 else [(url, "m"), (ar, "ar")]
                got = {name: timed(client, where, ids, max_tokens) for where, name in arms}
                logs.append(math.log(got["ar"][0] / got["m"][0]))
                seconds, ar_seconds = seconds + got["m"][0], ar_seconds + got["ar"][0]
                same &= got["ar"][1] == got["m"][1]
        acceptance = counter_acceptance(before, counters(client, url))[0]
    n = len(logs)
    half = T975[min(n - 2, 9)] * stdev(logs) / math.sqrt(n)
    return {
        "ratio": math.exp(mean(logs)),
        "low": math.exp(mean(logs) - half),
        "high": math.exp(mean(logs) + half),
        "tps": n * max_tokens / seconds,
        "ar_tps": n * max_tokens / ar_seconds,
        "tau": acceptance,
        "same": same,
    }


def main() -> int:
    from ddtune.assets import default_tasks_file
    from ddtune.ddtree.models.tokenizer import Tokenizer
    from ddtune.train.tasks import read_jsonl

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument(
        "--methods", default="eagle3:1,eagle3:2,eagle3:3,eagle3:4,eagle3:5,dflash,ngram"
    )
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "paired-speed")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer.load(MODELS / "target")
    tasks = read_jsonl(default_tasks_file())[: args.prompts]
    prompts = [tokenizer.encode(t["prompt"]) for t in tasks]
    ar_proc = start(None, 18761, args.out / "ar.log")
    ar = "http://127.0.0.1:18761"
    try:
        wait_ready(ar_proc, ar)
        head = f"{'method':<10} {'tok/s':>7} {'AR tok/s':>9} {'x AR (95% CI)':>20} {'tau':>6}"
        print(head + "  T=0 tokens vs AR")
        for name in args.methods.split(","):
            print(paired_row(name, ar, prompts, args), flush=True)
    finally:
        stop(ar_proc)
    return 0


def paired_row(name: str, ar: str, prompts: list[list[int]], args: argparse.Namespace) -> str:
    proc = start(method_config(name), 18762, args.out / f"{name.replace(':', '-')}.log")
    url = "http://127.0.0.1:18762"
    try:
        wait_ready(proc, url)
        r = bench(ar, url, prompts, args.rounds, args.max_tokens)
    finally:
        stop(proc)
    ci = f"{r['ratio']:.2f} ({r['low']:.2f}-{r['high']:.2f})"
    same = "identical" if r["same"] else "DIFFERENT"
    speeds = f"{r['tps']:>7.1f} {r['ar_tps']:>9.1f}"
    return f"{name:<10} {speeds} {ci:>20} {r['tau'] or 0:>6.2f}  {same}"


if __name__ == "__main__":
    sys.exit(main())
