"""Load levels: closed-loop concurrency and open-loop Poisson rates, latency and goodput.

    from ddtune.bench.load.generator import run_load, LoadTarget
    result = run_load(LoadTarget(url, kind), matrix, prompts)

`config` (`[bench.load]` and `[bench.slo]`), `generator` (the levels),
`stream` (a lean keep-alive streaming client), `latency` (per-request figures,
percentiles, SLO checks and goodput), `search` (`search = "max_rate"`).
See docs/load.md.

The face holds the tables and figures; `generator` (which takes a whole
`BenchMatrix`, built from these tables) is imported by its own name, so
that the matrix importing the tables never runs the code that reads it.
"""

from ddtune.bench.load.config import LoadLevel, LoadTable, SloTable
from ddtune.bench.load.latency import Distribution, LevelResult

__all__ = [
    "Distribution",
    "LevelResult",
    "LoadLevel",
    "LoadTable",
    "SloTable",
]
