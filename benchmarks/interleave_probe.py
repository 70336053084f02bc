"""Would alternating requests between configs cancel a race's noise? Measured on a real server.

    PYTHONPATH=src python benchmarks/interleave_probe.py [--a 16,4,64] [--b 16,8,64] [--blocks 10]

Starts one `ddtune serve` (bundled models, one torch thread) and compares two
DDTree configs (budget,topk,window; "none" for the whole context) on the demo's
short and long prompts (examples/demo-hot.toml's bench), two ways per block:

    back to back  set A, run every prompt; set B, run every prompt (what a
                  sweep pass does today: one bench per config)
    alternated    for every prompt: set A, run it; set B, run it

Each way gives one log(throughput A / throughput B) per block; the script
prints their mean and spread over the blocks. With `--a` equal to `--b` every
difference is noise. Configs switch through POST /v1/ddtree/config, whose
reply is checked to carry the config asked for. See docs/benchmarks.md "The demo".
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from ddtune.bench.runner import matrix_prompts
from ddtune.sweep.plan import read_spec


def start_server() -> tuple[subprocess.Popen[str], str]:
    """`ddtune serve --port 0` (one torch thread); its base URL once it prints
    `ready instance_id=... port=N` (after loading and warming up; stdout is only that)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "ddtune.cli", "serve", "--port", "0", "--mode", "ar"]
    server = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    line = server.stdout.readline() if server.stdout else ""
    if not line.startswith("ready "):
        server.kill()
        raise SystemExit(f"ddtune serve did not become ready (exit {server.wait()}): {line!r}")
    port = dict(field.split("=", 1) for field in line.split()[1:])["port"]
    return server, f"http://127.0.0.1:{port}"


def parse_config(text: str) -> dict[str, object]:
    budget, topk, window = text.split(",")
    wire = window if window == "none" else int(window)
    return {"mode": "ddtree", "budget": int(budget), "topk": int(topk), "window": wire}


def switch(client: httpx.Client, config: dict[str, object]) -> None:
    reply = client.post("/v1/ddtree/config", json=config).json()
    live = reply.get("config", {})
    if any(live.get(key) != (None if value == "none" else value) for key, value in config.items()):
        raise SystemExit(f"the server did not take {config}: {reply}")


def run(client: httpx.Client, prompt: str, max_tokens: int) -> tuple[int, float]:
    """(completion tokens, seconds) of one request."""
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    t0 = time.perf_counter()
    reply = client.post("/v1/completions", json=body).json()
    if "usage" not in reply:
        raise SystemExit(f"the request failed: {reply}")
    return reply["usage"]["completion_tokens"], time.perf_counter() - t0


def log_ratio(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> float:
    rate = [sum(t for t, _ in runs) / sum(s for _, s in runs) for runs in (a, b)]
    return math.log(rate[0] / rate[1])


def block(client, configs, prompts, max_tokens) -> tuple[float, float]:
    """(back-to-back log ratio, alternated log ratio) of one block."""
    back = {}
    for name, config in configs.items():
        switch(client, config)
        back[name] = [run(client, p, max_tokens) for p in prompts]
    alternated: dict[str, list[tuple[int, float]]] = {name: [] for name in configs}
    for p in prompts:
        for name, config in configs.items():
            switch(client, config)
            alternated[name].append(run(client, p, max_tokens))
    return log_ratio(back["a"], back["b"]), log_ratio(alternated["a"], alternated["b"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", default="16,4,64")
    parser.add_argument("--b", default="16,8,64")
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--spec", type=Path, default=Path("examples/demo-hot.toml"))
    args = parser.parse_args()
    if args.blocks < 2:
        parser.error("--blocks must be at least 2: a spread needs two blocks")
    m = read_spec(args.spec).bench
    texts = matrix_prompts(m)
    prompts = texts.short + texts.long
    configs = {"a": parse_config(args.a), "b": parse_config(args.b)}
    server, url = start_server()
    try:
        with httpx.Client(base_url=url, timeout=120) as client:
            block(client, configs, prompts[:1], 32)  # warm both configs
            rows = [block(client, configs, prompts, m.short.max_tokens) for _ in range(args.blocks)]
    finally:
        server.terminate()
        server.wait(30)
    print(f"A = ddtree {args.a}, B = ddtree {args.b}; {len(prompts)} prompts a config a block")
    for i, name in enumerate(("back to back", "alternated")):
        values = [r[i] for r in rows]
        mean, sd = statistics.fmean(values), statistics.stdev(values)
        print(f"  {name:12s} log(A/B) mean {mean:+.3f}, sd {sd:.3f} over {len(values)} blocks")


if __name__ == "__main__":
    main()
