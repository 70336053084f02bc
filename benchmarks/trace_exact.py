"""Is a trace's prediction exact on ddtune's own engine? Every config, every prompt, every round.

    PYTHONPATH=src python benchmarks/trace_exact.py [--prompts 8] [--max-tokens 64] [--seed 4242]

One process, the bundled float32 models. Held-out prompts (seeded slices of the
held-out standard-library files the bundled models never trained on, a seed no
test uses; half of them ~100 tokens, half ~320 so that window 64 matters) are
traced once (`ddtune.trace`: windows 64 and none, K = 8). Then for every config
of budgets 4-64 x topk 2-8 x window {64, none} (the demo's grid is inside it)
and DFlash at both windows, each prompt is decoded by `Engine.generate` (what
`ddtune generate` runs) and its `stats.acceptance_lengths` compared with the
trace's replay, round by round. Printed: the share of (config, prompt) pairs
whose lists are equal, and for every mismatch the first differing round and
why: the engine's own drafter top-K at that round (captured from the round)
against the trace's, the largest log-prob difference between the two, and the
smallest gap between neighbouring log-probs there (a near-tie that float32
rounding can flip). Also the trace's cost: seconds per 1,000 traced tokens
and its size on disk. Results: docs/benchmarks.md "Traces".
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ddtune.assets import default_drafter_dir, default_target_dir
from ddtune.bench.prompts import build_prompt_set
from ddtune.ddtree import decoding
from ddtune.params import DecodeParams, SamplingParams
from ddtune.trace.files import size_bytes, view_name
from ddtune.trace.predict import Trace
from ddtune.trace.record import OwnTarget, TraceSettings, record_trace
from ddtune.trace.sources import requests_from_prompts

BUDGETS = (4, 8, 16, 32, 64)
TOPKS = (2, 4, 6, 8)
WINDOWS = (64, None)


class DraftTap:
    """Keeps every round's drafter top-K (`Session._draft`'s return) while installed."""

    def __init__(self) -> None:
        self.rounds: list[tuple[list[list[float]], list[list[int]]]] = []
        self.inner = decoding.Session._draft

        def tapped(session: Any, drafter: Any, max_depth: int) -> Any:
            out = self.inner(session, drafter, max_depth)
            self.rounds.append(out)
            return out

        decoding.Session._draft = tapped  # type: ignore[method-assign]


def configs() -> list[DecodeParams]:
    grid = [
        DecodeParams("ddtree", b, k, w) for w, b, k in itertools.product(WINDOWS, BUDGETS, TOPKS)
    ]
    return [*grid, *(DecodeParams("dflash", 0, 1, w) for w in WINDOWS)]


def explain(
    trace: Trace,
    prompt: int,
    params: DecodeParams,
    engine_lengths: list[int],
    predicted: list[int],
    tap: DraftTap,
) -> str:
    """Where the two first part, and what the drafter's numbers were there."""
    pairs = list(zip(engine_lengths, predicted, strict=False))
    r = next((i for i, (a, b) in enumerate(pairs) if a != b), len(pairs))
    row = 1 + sum(engine_lengths[:r]) - 1  # the round's root row in the trace
    data = trace.data[prompt]
    arrays = data.views[view_name(params.window, trace.header.block_size)]
    own_lp, own_ids = tap.rounds[r] if r < len(tap.rounds) else ([], [])
    depth = len(own_lp)
    theirs_lp = arrays["top_lp"][row, :depth, : len(own_lp[0]) if own_lp else 0]
    theirs_ids = arrays["top_ids"][row, :depth, : len(own_lp[0]) if own_lp else 0]
    diff = float(np.abs(np.array(own_lp) - theirs_lp).max()) if own_lp else float("nan")
    same_ids = bool(np.array_equal(np.array(own_ids), theirs_ids)) if own_ids else False
    gaps = (
        np.diff(-np.array(own_lp), axis=1) if own_lp and len(own_lp[0]) > 1 else np.array([np.inf])
    )
    return (
        f"{params.label()} prompt {prompt}: round {r} (engine {engine_lengths[r : r + 3]}, "
        f"trace {predicted[r : r + 3]}); drafter log-probs differ by up to {diff:.2e}, "
        f"top ids {'equal' if same_ids else 'DIFFER'}, smallest neighbour gap {gaps.min():.2e}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=4242)
    args = parser.parse_args()
    half = args.prompts // 2
    prompt_set = build_prompt_set(args.seed, (half, 100), (args.prompts - half, 320), 3.0)
    texts = prompt_set.short + prompt_set.long
    side = OwnTarget(default_target_dir(), default_drafter_dir())
    requests = requests_from_prompts(texts, args.max_tokens, ignore_eos=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "trace"
        started = time.perf_counter()
        record_trace(side, requests, folder, TraceSettings(WINDOWS, (), 8))
        seconds = time.perf_counter() - started
        trace = Trace.read(folder)
        size = size_bytes(folder)
    tokens = sum(len(d.generated) for d in trace.data)
    print(
        f"trace: {len(texts)} prompts, {tokens} traced tokens, 2 windows, K = 8: "
        f"{seconds:.1f} s ({1000 * seconds / tokens:.1f} s per 1,000 tokens), "
        f"{size / 1024:.0f} KiB ({size / tokens / 1024:.2f} KiB a token)"
    )
    sampling = SamplingParams(max_new_tokens=args.max_tokens, ignore_eos=True)
    tap = DraftTap()
    equal, pairs, misses = 0, 0, []
    for params in configs():
        prediction = trace.predict(params)
        for i, text in enumerate(texts):
            tap.rounds.clear()
            result = side.engine.generate(side.encode(text), params, sampling)
            got, want = result.stats.acceptance_lengths, list(prediction.requests[i][2].lengths)
            pairs += 1
            if got == want:
                equal += 1
            else:
                misses.append(explain(trace, i, params, got, want, tap))
    print(
        f"{len(configs())} configs x {len(texts)} prompts: {equal}/{pairs} equal round by round "
        f"({equal / pairs:.1%})"
    )
    for line in misses:
        print("  mismatch:", line)


if __name__ == "__main__":
    main()
