"""Trial records -> blocks: objective values, finished passes, passes per start, start groups."""

from __future__ import annotations

import pytest

from ddtune.params import DecodeParams
from ddtune.records import TrialRecord
from ddtune.sweep.plan.passes import (
    block_of,
    blocked_samples,
    objective_value,
    pass_results,
)


def _rec(i, label, repeat, short=100.0, long=64.0, status="done", coding=None, instance=None):
    metrics = {"short_tps": short, "long_tps": long}
    if coding:
        metrics |= {"coding_passed": coding[0], "coding_total": coding[1]}
    conditions = {"server_identity": {"instance_id": instance}} if instance else {}
    params = DecodeParams("ddtree", 4, 2)
    return TrialRecord(
        i, label, params, False, repeat, status, metrics=metrics, conditions=conditions
    )


def test_objective_values():
    rec = _rec(1, "a", 1)
    assert objective_value(rec, "throughput") == pytest.approx(80.0)  # sqrt(100 * 64)
    assert objective_value(rec, "long_context") == 64.0
    assert objective_value(rec, "short_context") == 100.0
    assert objective_value(_rec(2, "a", 1, status="failed"), "throughput") is None
    assert objective_value(_rec(3, "a", 1, long=None), "throughput") is None
    assert objective_value(_rec(4, "a", 1, long=0.0), "long_context") is None


def test_pass_results_stop_at_the_first_unfinished_pass():
    records = [
        _rec(1, "base", 1),
        _rec(2, "a", 1, coding=(3, 4)),
        _rec(3, "base", 2),
        _rec(4, "a", 2, status="failed"),
        _rec(5, "base", 3),
        _rec(6, "a", 3, status="interrupted"),
    ]
    passes = pass_results(records, "throughput", seconds={1: 10.0, 2: 20.0, 3: 5.0})
    assert len(passes) == 2
    assert passes[0].values == {"base": pytest.approx(80.0), "a": pytest.approx(80.0)}
    assert passes[0].coding == {"a": (3, 4)} and passes[0].seconds == 30.0
    assert passes[1].values["a"] is None  # a failed trial: no measurement, still a trial
    assert passes[1].seconds == 5.0


def test_blocks_with_passes_per_start():
    assert [block_of(r, 3) for r in range(1, 8)] == [1, 1, 1, 2, 2, 2, 3]
    records = [_rec(i, "a", i, short=v, long=v) for i, v in enumerate([1.0, 4.0, 2.0, 8.0], 1)]
    samples = blocked_samples(records, "throughput", passes_per_start=2)
    assert samples["a"] == {1: pytest.approx(2.0), 2: pytest.approx(4.0)}  # geometric means
    assert len(pass_results(records, "throughput", passes_per_start=2)) == 2
    records[3].status = "pending"  # block 2 is not finished yet
    assert len(pass_results(records, "throughput", passes_per_start=2)) == 1
