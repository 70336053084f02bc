"""The three walks of `engine/walk.py` on the same engine, prompts and configs, interleaved.

    PYTHONPATH=src python benchmarks/walk_strategies.py [--budgets 0,8,16,32] [--repeats 6]

One process, one thread, ddtune's bundled models and 4 held-out prompts x 64
tokens at T=0 (budget 0 = dflash). For every config and repeat it runs the
prompts once per walk, in an order that rotates every repeat: likely path
first (the default), every node in one matmul, one matmul per depth. It
prints the median tokens per CPU-second of each, each walk's median ratio to
likely-first with the per-repeat ratios, the median `verify` stage seconds
(the target forward plus the walk), the LM-head rows a round computes (the
drafter's block and the walk's; the one figure here free of the machine's
noise) and whether all three emitted the same tokens. See docs/performance.md "The likely-first walk".
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch

from ddtune.assets import default_drafter_dir, default_target_dir
from ddtune.ddtree import walk
from ddtune.ddtree.bench.speed import default_prompts
from ddtune.ddtree.engine import Engine
from ddtune.params import DecodeParams, SamplingParams

WALKS = {  # name -> (NODES_PER_ROW, LIKELY_FIRST)
    "likely-first": (walk.NODES_PER_ROW, True),
    "all-nodes": (walk.NODES_PER_ROW, False),
    "per-depth": (0, True),
}


class CountingHead:
    """The target's LM head, counting the rows it computes (the drafter's and the walk's)."""

    def __init__(self, engine: Engine) -> None:
        self.head, self.rows = engine.target.lm_logits, 0
        engine.target.lm_logits = self  # type: ignore[method-assign]

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        self.rows += h.numel() // h.shape[-1]
        return self.head(h)


def run(engine: Engine, prompts: list[list[int]], params: DecodeParams) -> dict[str, Any]:
    sampling = SamplingParams(max_new_tokens=64, ignore_eos=True)
    head = engine.target.lm_logits
    assert isinstance(head, CountingHead)
    cpu0, tokens, verify, rounds, outputs = time.process_time(), 0, 0.0, 0, []
    head.rows = 0
    for ids in prompts:
        result = engine.generate(ids, params, sampling)
        tokens += len(result.token_ids)
        verify += result.stats.stage_seconds["verify"]
        rounds += len(result.stats.acceptance_lengths)
        outputs.append(result.token_ids)
    rate = tokens / (time.process_time() - cpu0)
    return {"rate": rate, "verify": verify, "rows": head.rows / rounds, "outputs": outputs}


def compare(engine: Engine, prompts: list[list[int]], budget: int, repeats: int) -> None:
    mode = "ddtree" if budget else "dflash"
    params = DecodeParams(mode, budget or 16, 4, None).canonical()  # type: ignore[arg-type]
    run(engine, prompts, params)  # warm-up
    got: dict[str, list[dict[str, Any]]] = {name: [] for name in WALKS}
    names = list(WALKS)
    for repeat in range(repeats):
        for name in names[repeat % 3 :] + names[: repeat % 3]:  # rotate who goes first
            walk.NODES_PER_ROW, walk.LIKELY_FIRST = WALKS[name]
            got[name].append(run(engine, prompts, params))
    walk.NODES_PER_ROW, walk.LIKELY_FIRST = WALKS["likely-first"]
    first = got["likely-first"][0]["outputs"]
    same = all(r["outputs"] == first for runs in got.values() for r in runs)
    label = f"ddtree b{budget}" if budget else "dflash"
    base = got["likely-first"]
    print(f"{label}: same tokens from all three walks: {'yes' if same else 'NO'}")
    for name, runs in got.items():
        ratios = [b["rate"] / r["rate"] for b, r in zip(base, runs, strict=True)]
        print(
            f"  {name:<12} {statistics.median(r['rate'] for r in runs):7.1f} tok/CPU-s  "
            f"likely-first x{statistics.median(ratios):.3f} "
            f"({' '.join(f'{x:.2f}' for x in ratios)})  "
            f"verify {statistics.median(r['verify'] for r in runs):.3f} s  "
            f"LM-head rows per round {runs[0]['rows']:.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="0,8,16,32", help="0 = dflash")
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args()
    torch.set_num_threads(1)
    engine = Engine.load(default_target_dir(), default_drafter_dir())
    CountingHead(engine)
    texts, source = default_prompts(4)
    prompts = [engine.tokenizer.encode(t) for t in texts]
    print(f"prompts: {source}; 64 tokens, T=0, {args.repeats} repeats, one thread")
    for budget in (int(b) for b in args.budgets.split(",")):
        compare(engine, prompts, budget, args.repeats)


if __name__ == "__main__":
    main()
