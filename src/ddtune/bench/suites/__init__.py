"""Bench suites: published workloads (HumanEval, MT-Bench, GSM8K, agent sessions) and the
user's own traffic, each one workload of the matrix with its own figures.

    [bench]
    suite = ["humaneval", "mt-bench", "gsm8k"]   # default "bundled": short, long, coding
    traffic_file = "gateway.jsonl"

Read in this order: `names` (the vocabulary and where each suite's data
lives), `config` (`[bench.suites.<name>]`, `[bench.traffic]`), `sources`
(a package's data file, never its code), `items` (`SuiteItem`, seeded
subsets), one module per suite (`humaneval`, `mtbench`, `gsm8k`, `agent`),
`traffic` (the user's logged requests), `plan` (the requests a bench sends),
`scoring` (sandboxed tests, numeric answers), `figures` (per workload, the mix).
Data card: `src/ddtune/assets/suites/DATA_CARD.md`.

The face holds the vocabulary, the tables and the figures; `plan` and
`scoring` (which take a whole `BenchMatrix`, built from these tables) are
imported by their own names, so the matrix never runs the code that reads it.
"""

from ddtune.bench.suites.config import SuitesTable, SuiteTable, TrafficTable
from ddtune.bench.suites.figures import mix_tps, workload_figures, workload_of
from ddtune.bench.suites.names import BUNDLED, SUITE_NAMES, TRAFFIC, WORKLOAD_NAMES
from ddtune.bench.suites.traffic import private_sample

__all__ = [
    "BUNDLED",
    "SUITE_NAMES",
    "TRAFFIC",
    "WORKLOAD_NAMES",
    "SuiteTable",
    "SuitesTable",
    "TrafficTable",
    "mix_tps",
    "private_sample",
    "workload_figures",
    "workload_of",
]
