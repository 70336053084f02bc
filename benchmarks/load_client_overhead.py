"""The load generator's own CPU cost: is the client ever the bottleneck?

Runs `[bench.load]` levels of the real bench client against the loopback
FakeLoadServer (tests/bench/load/fake_load_server.py) started in its own process,
so the client process's CPU time (psutil, user + system, recorded by every
level as `client_cpu_s`) is the generator's alone. Prints per level: requests,
chunks per second, client CPU per request and per chunk, and the share of one
core. The bar (issue 16): < 10% of one core at the highest level.

    PYTHONPATH=src python benchmarks/load_client_overhead.py [--token-ms 20] [--tokens 64]
        [--concurrency 1,4,16] [--rate 8] [--requests 32] [--url URL --engine ENGINE]

The fake server streams one token per chunk every `--token-ms` ms per request
(20 ms = 50 tok/s per stream, a real server's pace) after a `--ttft-ms` first
token. With `--url` the same levels run against a live server instead (e.g.
`ddtune serve`); the client's share of a core is then measured beside a real
model on the same CPUs.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from ddtune.bench import BenchMatrix, run_bench
from ddtune.bench.load.latency import LevelResult

ROOT = Path(__file__).resolve().parents[1]


def fake_server_module():
    path = ROOT / "tests" / "bench" / "fake_load_server.py"
    spec = importlib.util.spec_from_file_location("fake_load_server", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def matrix(args: argparse.Namespace) -> BenchMatrix:
    off = {"enabled": False}
    load = {"requests": args.requests, "warmup_requests": 2}
    if args.concurrency:
        load["concurrency"] = [int(c) for c in args.concurrency.split(",")]
    if args.rate:
        load["rate"] = [float(r) for r in args.rate.split(",")]
    short = {"enabled": False, "n_prompts": 4, "prompt_tokens": 100, "max_tokens": args.tokens}
    return BenchMatrix.from_dict({"short": short, "long": off, "coding": off, "load": load})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--token-ms", type=float, default=20.0)
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--rate", default="8")
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--url", help="a live server instead of the fake one")
    parser.add_argument("--engine", default="openai")
    args = parser.parse_args()
    if args.url:
        result = run_bench(args.url, matrix(args), engine=args.engine, progress=False)
        print(f"server: {args.engine} at {args.url}; {args.tokens} tokens per request")
    else:
        fake = fake_server_module()
        latency = fake.Latency(ttft_s=args.ttft_ms / 1000, token_s=args.token_ms / 1000)
        with fake.separate_process(latency, kind="openai") as (url, _):
            result = run_bench(url, matrix(args), engine="openai", progress=False)
        print(
            f"server: fake, {args.ttft_ms:g} ms to the first token, then 1 token per chunk "
            f"every {args.token_ms:g} ms; {args.tokens} tokens per request"
        )
    levels = [LevelResult.from_dict(d) for d in result.load_result["levels"]]
    header = (
        "level  requests  wall s  chunks/s  CPU ms/request  CPU us/chunk  share of one core"
        "  tok/s  streams at once"
    )
    print(header)
    for level in levels:
        print(_line(level, result.load_result["requests"]))
    top = levels[-1] if not args.rate else max(levels, key=lambda lv: lv.output_tps or 0.0)
    verdict = "below" if (top.client_cpu_share or 0) < 0.10 else "ABOVE"
    print(
        f"busiest level {top.key}: the client used {top.client_cpu_share:.1%} of one core, "
        f"{verdict} the 10% bar"
    )


def _line(level: LevelResult, rows: list[dict]) -> str:
    sent = level.requests + level.warmup
    cpu = level.client_cpu_s or 0.0
    wall = cpu / level.client_cpu_share if level.client_cpu_share else float("nan")
    measured = [r["chunks"] for r in rows if r["level"] == level.key and r.get("chunks")]
    chunks = sum(measured) / max(len(measured), 1) * sent  # warm-up requests like the rest
    return (
        f"{level.key:<6} {sent:>8}  {wall:>6.1f}  {chunks / wall:>8.0f}  "
        f"{1000 * cpu / sent:>14.2f}  {1e6 * cpu / chunks:>12.1f}  {level.client_cpu_share:>17.1%}"
        f"  {level.output_tps or 0:>5.0f}  {level.parallelism or 0:>6.2f}"
        + ("  serialised" if level.serialised else "")
    )


if __name__ == "__main__":
    main()
