"""Trial planning: configurations × repeats, in the order the spec asks for.

    sequential   config-major: c1r1 c1r2 c2r1 c2r2 ...  (drift lands on configs)
    interleaved  repeat-major: each pass runs every config once, c1r1 c2r1 ... c1r2 c2r2
    random       a seeded shuffle of all trials (same seed, same order)

The baseline is a configuration like any other (flagged `is_baseline`), so it
is measured under the same conditions and interleaved with the rest.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ddtune.errors import UserError
from ddtune.sweep.spec import ORDERS, Config, SweepSpec


@dataclass(frozen=True)
class PlannedTrial:
    order_index: int  # position in the run order, 0-based
    config: Config
    repeat: int  # 1-based
    is_baseline: bool


def plan_trials(
    configs: list[tuple[Config, bool]], repeats: int, order: str, seed: int = 0
) -> list[PlannedTrial]:
    """All (config, repeat) pairs in run order; `configs` holds (config, is_baseline)."""
    if order not in ORDERS:
        raise UserError(f"order must be one of {', '.join(ORDERS)}; got {order!r}")
    if order == "sequential":
        pairs = [(c, r) for c in range(len(configs)) for r in range(1, repeats + 1)]
    else:
        pairs = [(c, r) for r in range(1, repeats + 1) for c in range(len(configs))]
    if order == "random":
        random.Random(seed).shuffle(pairs)
    return [PlannedTrial(i, configs[c][0], r, configs[c][1]) for i, (c, r) in enumerate(pairs)]


def plan_spec(spec: SweepSpec) -> list[PlannedTrial]:
    return plan_trials(spec.all_configs(), spec.repeats, spec.order, spec.seed)
