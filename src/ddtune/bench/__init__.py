"""Benchmark matrix: throughput at short and long context, acceptance length, coding
correctness by executing tests in a sandbox, and losslessness at T=0.

    from ddtune.bench import BenchMatrix, run_bench, compare_outputs
    result = run_bench("http://127.0.0.1:8000", BenchMatrix.from_dict({}), engine="ddtune")
    result.aggregates["short_tps"]; compare_outputs(baseline.outputs, result.outputs).detail
"""

from ddtune.bench.client import BenchError
from ddtune.bench.hardware import hardware_fingerprint
from ddtune.bench.lossless import LosslessVerdict, compare_outputs
from ddtune.bench.matrix import BenchMatrix, CodingWorkload, ThroughputWorkload
from ddtune.bench.result import BenchResult
from ddtune.bench.runner import run_bench

__all__ = [
    "BenchError",
    "BenchMatrix",
    "BenchResult",
    "CodingWorkload",
    "LosslessVerdict",
    "ThroughputWorkload",
    "compare_outputs",
    "hardware_fingerprint",
    "run_bench",
]
