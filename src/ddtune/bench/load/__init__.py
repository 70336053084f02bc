"""Load levels: closed-loop concurrency and open-loop Poisson rates, latency and goodput.

    from ddtune.bench.load import run_load, LoadTarget
    result = run_load(LoadTarget(url, kind), matrix, prompts)

`config` (`[bench.load]` and `[bench.slo]`), `generator` (the levels),
`stream` (a lean keep-alive streaming client), `latency` (per-request figures,
percentiles, SLO checks and goodput), `search` (`search = "max_rate"`).
See docs/load.md.
"""

from ddtune.bench.load.config import LoadLevel, LoadTable, SloTable
from ddtune.bench.load.generator import LoadResult, LoadTarget, run_load
from ddtune.bench.load.latency import Distribution, LevelResult

__all__ = [
    "Distribution",
    "LevelResult",
    "LoadLevel",
    "LoadResult",
    "LoadTable",
    "LoadTarget",
    "SloTable",
    "run_load",
]
