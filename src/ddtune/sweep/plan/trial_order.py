"""Trial planning: configurations × passes, in the order the spec asks for.

    sequential   config-major: c1r1 c1r2 c2r1 c2r2 ...  (drift lands on configs)
    interleaved  pass-major: each pass runs every config once, in a seeded shuffle
                 of its own (`block_order`): a randomised complete block design
    random       a seeded shuffle of all trials (same seed, same order)

With `passes_per_start = k` a block is k consecutive passes and each config's
k passes of a block run back to back on one server start. The baseline is a
configuration like any other (flagged `is_baseline`), so it is measured in
every pass under the same conditions. A race plans its first `min_repeats`
passes here and every later pass from the store (the race strategy's `next_batch`); a search
plans nothing up front. See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from ddtune.errors import UserError
from ddtune.sweep.spec.parse import ORDERS, Config
from ddtune.sweep.store.db import PlannedTrial


def block_order(labels: Sequence[str], seed: int, pass_no: int) -> list[str]:
    """The run order of one pass: a seeded shuffle (randomised complete block design)."""
    order = list(labels)
    random.Random(f"ddtune-block:{seed}:{pass_no}").shuffle(order)
    return order


def plan_trials(
    configs: list[tuple[Config, bool]],
    repeats: int,
    order: str,
    seed: int = 0,
    passes_per_start: int = 1,
) -> list[PlannedTrial]:
    """All (config, repeat) pairs in run order; `configs` holds (config, is_baseline)."""
    if order not in ORDERS:
        raise UserError(f"order must be one of {', '.join(ORDERS)}; got {order!r}")
    if order == "interleaved":
        blocks = range(1, (repeats - 1) // passes_per_start + 2)
        trials: list[PlannedTrial] = []
        for block in blocks:
            trials += plan_block(configs, block, seed, passes_per_start, len(trials), repeats)
        return trials
    pairs = [(c, r) for c in range(len(configs)) for r in range(1, repeats + 1)]
    if order == "random":
        random.Random(seed).shuffle(pairs)
    return [PlannedTrial(i, configs[c][0], r, configs[c][1]) for i, (c, r) in enumerate(pairs)]


def plan_block(
    configs: Sequence[tuple[Config, bool]],
    block: int,
    seed: int,
    passes_per_start: int = 1,
    first_index: int = 0,
    last_pass: int | None = None,
) -> list[PlannedTrial]:
    """One block in its shuffled order: each config's passes of the block back to back."""
    by_label = {config.label(): (config, is_baseline) for config, is_baseline in configs}
    first = (block - 1) * passes_per_start + 1
    passes = range(
        first, min(first + passes_per_start, (last_pass or first + passes_per_start - 1) + 1)
    )
    trials: list[PlannedTrial] = []
    for label in block_order(list(by_label), seed, block):
        config, is_baseline = by_label[label]
        for repeat in passes:
            trials.append(PlannedTrial(first_index + len(trials), config, repeat, is_baseline))
    return trials
