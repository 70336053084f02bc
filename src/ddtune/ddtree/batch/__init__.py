"""Continuous batching: many requests' DDTree rounds in one drafter and one verify forward.

    from ddtune.ddtree.batch import Scheduler, BatchRequest
    scheduler = Scheduler(engine, max_batch=8, max_step_tokens=2048)

`budget` (the per-step token budget, torch-free: the server checks it at
startup), `slot_cache` (one preallocated KV slot per running request),
`packing` (padded verify/draft inputs and masks), `rounds` (batched rounds),
`scheduler` (admission, chunked prefill, rounds). The walk is the engine's
`walk.py`, shared with the single-request `Session`. torch is imported on
first use of a name other than the budget's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddtune.ddtree.batch.budget import check_round_fits
from ddtune.lazy import lazy_names

if TYPE_CHECKING:
    from ddtune.ddtree.batch.scheduler import BatchRequest, BatchResult, Scheduler, generate_batch

__getattr__ = lazy_names(
    __name__,
    {name: "scheduler" for name in ("BatchRequest", "BatchResult", "Scheduler", "generate_batch")},
)

__all__ = [
    "BatchRequest",
    "BatchResult",
    "Scheduler",
    "check_round_fits",
    "generate_batch",
]
