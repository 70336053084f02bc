"""`run_alternated` without a server: input it cannot bench fails every arm, never the caller.

The turns themselves (request r of every arm before r + 1, fingerprints checked) run
against a live `ddtune serve` in test_live_ddtune.py."""

from __future__ import annotations

import pytest

from ddtune.bench import BenchMatrix
from ddtune.bench.alternate import Arm, run_alternated


def test_a_bench_that_cannot_be_planned_fails_every_arm(tmp_path):
    matrix = BenchMatrix.from_dict({"coding": {"tasks_file": str(tmp_path / "missing.jsonl")}})
    switched: list[int] = []
    arms = [Arm(lambda i=i: switched.append(i) or "fp") for i in range(3)]
    run_alternated("http://127.0.0.1:9", matrix, "ddtune", arms)
    assert switched == []  # nothing was sent
    assert all(a.result is None and "missing.jsonl does not exist" in (a.error or "") for a in arms)


def test_concurrent_or_load_benches_are_refused():
    matrix = BenchMatrix.from_dict({"concurrency": 2})
    with pytest.raises(ValueError, match="one request at a time"):
        run_alternated("http://127.0.0.1:9", matrix, "ddtune", [Arm(lambda: "fp")])
