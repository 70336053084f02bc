"""Running a sweep: reconfigure -> READY -> bench -> store, for every trial, resumably.

loop         the local trial loop (`run_sweep`, `TrialLoop`)
attempt      one attempt of one trial: what a slot executes, what the driver stores
interleaved  a pass whose configs take turns request by request (hot services)
common       the run summary, exit codes and signals
ray/         the Ray backend: trials on a pool of service slots

`run_sweep` is imported on first use: a Ray slot or `sweep watch` that needs
only `common` does not load the loop, the strategies and the services.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddtune.lazy import lazy_names
from ddtune.sweep.run.common import RunSummary, default_store_path

if TYPE_CHECKING:
    from ddtune.sweep.run.loop import run_sweep

__getattr__ = lazy_names(__name__, {"run_sweep": "loop"})

__all__ = ["RunSummary", "default_store_path", "run_sweep"]
