"""The engine's own benchmarks: `ddtune bench-engine`, single stream and under concurrency.

    from ddtune.ddtree.bench import run_engine_bench, run_concurrency_bench

`speed` (AR vs DFlash vs DDTree budgets on the same prompts, one request at a
time), `loadspeed` (aggregate tok/s through the batch scheduler at each
concurrency), `tables` (what the command prints); the CLI is `ddtune.cli.bench_engine`.
Figures: docs/performance.md. torch is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddtune.lazy import lazy_names

if TYPE_CHECKING:
    from ddtune.ddtree.bench.loadspeed import LoadRow, run_concurrency_bench
    from ddtune.ddtree.bench.speed import SpeedRow, run_engine_bench

__getattr__ = lazy_names(
    __name__,
    {
        "LoadRow": "loadspeed",
        "run_concurrency_bench": "loadspeed",
        "SpeedRow": "speed",
        "run_engine_bench": "speed",
    },
)

__all__ = [
    "LoadRow",
    "SpeedRow",
    "run_concurrency_bench",
    "run_engine_bench",
]
