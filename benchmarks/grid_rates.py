"""Which budget x topk x window configs are near each other? Engine rates on the demo's prompts.

    PYTHONPATH=src python benchmarks/grid_rates.py [--passes 3] [--spec examples/demo-hot.toml]

In-process (no server, no HTTP), one torch thread, T=0: for every config of
budget {4, 8, 16, 32, 64} x topk {1, 2, 4, 8} x window {none, 64} (topk 1 only
up to budget 8: beyond the drafter's block the chain is the same) and AR, the
spec's short and long bench prompts decode `max_tokens` tokens each; a pass
runs every config once in a seeded shuffled order. Prints each config's
throughput (geometric mean of short and long tok/s, as the sweep's objective)
relative to the best: the neighbours a demo grid should keep apart, or pair as
near-ties. Used to choose examples/demo-hot.toml (docs/benchmarks.md "The demo").
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

import torch

from ddtune.assets import default_drafter_dir, default_target_dir
from ddtune.bench.runner import matrix_prompts
from ddtune.ddtree.engine import Engine
from ddtune.params import DecodeParams, SamplingParams
from ddtune.sweep.plan import read_spec


def grid() -> list[DecodeParams]:
    ddtree = [
        DecodeParams("ddtree", b, k, w)
        for b in (4, 8, 16, 32, 64)
        for k in (1, 2, 4, 8)
        for w in (None, 64)
        if k > 1 or b <= 8
    ]
    return [DecodeParams("ar"), *ddtree]


def log_rate(engine: Engine, prompts: dict[str, list[list[int]]], params: DecodeParams, n: int):
    """Mean over workloads of log(tokens / seconds), as the sweep's throughput objective."""
    sampling = SamplingParams(temperature=0.0, max_new_tokens=n, ignore_eos=True)
    logs = []
    for ids in prompts.values():
        tokens, seconds = 0, 0.0
        for prompt in ids:
            t0 = time.perf_counter()
            tokens += len(engine.generate(prompt, params, sampling).token_ids)
            seconds += time.perf_counter() - t0
        logs.append(math.log(tokens / seconds))
    return statistics.fmean(logs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--spec", type=Path, default=Path("examples/demo-hot.toml"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    m = read_spec(args.spec).bench
    texts = matrix_prompts(m)
    engine = Engine.load(default_target_dir(), default_drafter_dir())
    prompts = {
        w: [engine.tokenizer.encode(p) for p in getattr(texts, w)] for w in ("short", "long")
    }
    configs, rng = grid(), random.Random(0)
    logs: dict[str, list[float]] = {c.label(): [] for c in configs}
    for number in range(args.passes):
        for params in rng.sample(configs, len(configs)):
            logs[params.label()].append(log_rate(engine, prompts, params, m.short.max_tokens))
        print(f"pass {number + 1}/{args.passes} done", file=sys.stderr)
    means = {label: statistics.fmean(v) for label, v in logs.items()}
    top = max(means.values())
    for label, value in sorted(means.items(), key=lambda kv: -kv[1]):
        print(f"{label:24s} {math.exp(value):7.1f} tok/s  {math.exp(value - top):.3f}")


if __name__ == "__main__":
    main()
