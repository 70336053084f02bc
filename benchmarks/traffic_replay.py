"""The user's own traffic, replayed through the load generator: a logged file of mixed chat and
completion requests, streamed, at two concurrency levels against a live `ddtune serve`.

Writes a traffic file of `--requests` OpenAI bodies (seeded: half chats, half completions, the
prompts from HumanEval, MT-Bench and GSM8K, max_tokens 8-32, temperatures as logged 0-0.8, a
third of them wrapped as a gateway logs them), checks and samples it as a sweep would
(`bench.suites.traffic`), starts `ddtune serve` with the bundled models (DDTree b8 k4 by
default), and replays every request at each `--concurrency` level (`[bench.load] workload =
"traffic"`). Prints per level: requests, failures, chats, output tok/s, p50/p99 TTFT and e2e,
acceptance length.

    PYTHONPATH=src python benchmarks/traffic_replay.py [--requests 1000] [--concurrency 1,4]
        [--mode ddtree --budget 8 --topk 4] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from ddtune.bench.load.generator import LoadTarget, run_load
from ddtune.bench.matrix import BenchMatrix
from ddtune.bench.prompts import PromptSet
from ddtune.bench.suites.config import TrafficTable
from ddtune.bench.suites.gsm8k import gsm8k_items
from ddtune.bench.suites.humaneval import humaneval_items
from ddtune.bench.suites.mtbench import mtbench_items
from ddtune.bench.suites.traffic import read_traffic, traffic_requests
from ddtune.engines import get_engine


def write_traffic(path: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    code = [i.prompt[-600:] for i in humaneval_items()]
    chat = [i.messages[0][1][:500] for i in mtbench_items()] + [
        i.prompt[:500] for i in gsm8k_items()
    ]
    lines = []
    for i in range(n):
        body: dict[str, object] = {"max_tokens": rng.randint(8, 32), "model": "prod-model"}
        if rng.random() < 0.5:
            body["messages"] = [{"role": "user", "content": rng.choice(chat)}]
        else:
            body["prompt"] = rng.choice(code)
        body["temperature"] = rng.choice([0, 0, 0.2, 0.8])
        if body["temperature"]:
            body["seed"] = i
        lines.append(json.dumps({"body": body} if i % 3 == 0 else body))
    path.write_text("\n".join(lines) + "\n")


def serve(args: argparse.Namespace, port: int) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "ddtune.cli", "serve", "--port", str(port), "--mode", args.mode]
    if args.mode == "ddtree":
        argv += ["--budget", str(args.budget), "--topk", str(args.topk)]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("ready"):
        proc.kill()
        raise SystemExit(f"ddtune serve did not start: {line!r}")
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--mode", default="ddtree")
    parser.add_argument("--budget", type=int, default=8)
    parser.add_argument("--topk", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--port", type=int, default=18961)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "traffic.jsonl"
        write_traffic(path, args.requests, args.seed)
        t0 = time.perf_counter()
        specs = traffic_requests(read_traffic(path), TrafficTable(), args.seed)
        print(
            f"traffic file: {len(specs)} requests checked and sampled in {time.perf_counter() - t0:.2f} s"
        )
        load = {"concurrency": levels, "requests": len(specs), "workload": "traffic"}
        matrix = BenchMatrix.from_dict({"traffic_file": str(path), "load": load})
        proc = serve(args, args.port)
        try:
            url, kind = f"http://127.0.0.1:{args.port}", get_engine("ddtune")
            with httpx.Client() as client:
                model = kind.model_name(client, url)  # the logged "prod-model" is replaced
            target = LoadTarget(url, kind, model, 0.0, False, 300.0)
            started = time.perf_counter()
            result = run_load(target, matrix, PromptSet([], [], "none"), specs)
            seconds = time.perf_counter() - started
        finally:
            proc.terminate()
            proc.wait()
    chats = sum(1 for s in specs if '"messages"' in (s.body_json or ""))
    print(
        f"{args.mode} b{args.budget} k{args.topk}, {args.threads} thread(s); {chats} chats, "
        f"{len(specs) - chats} completions; {seconds:.0f} s in all"
    )
    for level in result.levels:
        ttft, e2e = level.ttft_s, level.e2e_s
        print(
            f"  {level.key}: {level.requests} requests, {level.failed} failed, "
            f"{level.output_tps or 0:.1f} output tok/s, TTFT p50 {ttft.p50 if ttft else 0:.3f} s "
            f"p99 {ttft.p99 if ttft else 0:.3f} s, e2e p50 {e2e.p50 if e2e else 0:.3f} s "
            f"p99 {e2e.p99 if e2e else 0:.3f} s, tau {level.acceptance_length or 0:.2f}, "
            f"in flight {level.in_flight or 0:.2f}"
            + (f"; first error: {level.error}" if level.error else "")
        )


if __name__ == "__main__":
    main()
