"""Running a sweep: reconfigure -> READY -> bench -> store, for every trial, resumably.

loop         the local trial loop (`run_sweep`, `TrialLoop`)
attempt      one attempt of one trial: what a slot executes, what the driver stores
interleaved  a pass whose configs take turns request by request (hot services)
common       the run summary, exit codes, signals and the hardware note
ray/         the Ray backend: trials on a pool of service slots
"""

from ddtune.sweep.run.common import RunSummary, default_store_path
from ddtune.sweep.run.loop import run_sweep

__all__ = [
    "RunSummary",
    "default_store_path",
    "run_sweep",
]
