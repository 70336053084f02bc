"""`[bench.load]` / `[bench.slo]`: levels, defaults, and bad input as one-line errors naming the key."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ddtune.bench import BenchMatrix
from ddtune.bench.load.config import DEFAULT_REQUESTS, LoadLevel, LoadTable
from ddtune.errors import UserError


def test_no_load_table_means_no_levels_and_the_old_defaults() -> None:
    matrix = BenchMatrix.from_dict({})
    assert matrix.load is None and matrix.slo is None
    assert BenchMatrix.from_dict(matrix.to_dict()) == matrix


def test_levels_in_run_order_with_keys_and_warmups() -> None:
    matrix = BenchMatrix.from_dict(
        {"load": {"concurrency": [16, 1, 4, 4], "rate": [2, 0.5]}, "slo": {"ttft_p99_s": 1}}
    )
    load = matrix.load
    assert load is not None
    assert [level.key for level in load.levels()] == ["c1", "c4", "c16", "r0.5", "r2"]
    assert [load.warmup_for(level) for level in load.levels()] == [1, 4, 16, 1, 2]
    assert load.measured_requests() == DEFAULT_REQUESTS
    assert matrix.slo is not None and matrix.slo.targets() == {"ttft": 1.0}
    assert BenchMatrix.from_dict(matrix.to_dict()) == matrix


def test_duration_and_explicit_warmup() -> None:
    load = LoadTable(rate=[1.5], duration_s=30, warmup_requests=0)
    assert load.measured_requests() is None
    assert load.warmup_for(LoadLevel.open(1.5)) == 0 and LoadLevel.open(1.5).key == "r1.5"


@pytest.mark.parametrize(
    ("table", "key", "message"),
    [
        ({"load": {}}, "bench.load", r"give concurrency = \[\.\.\.\] .* and/or rate"),
        ({"load": {"concurrency": []}}, "bench.load", r"and/or rate"),
        ({"load": {"concurrency": [4, 0]}}, "bench.load.concurrency.1", r"greater than 0; got 0"),
        ({"load": {"concurrency": [-2]}}, "bench.load.concurrency.0", r"greater than 0; got -2"),
        ({"load": {"rate": [0.0]}}, "bench.load.rate.0", r"greater than 0; got 0\.0"),
        ({"load": {"rate": ["fast"]}}, "bench.load.rate.0", r"valid number; got 'fast'"),
        ({"load": {"concurrency": 4}}, "bench.load.concurrency", r"valid list; got 4"),
        (
            {"load": {"rate": [1], "requests": 0}},
            "bench.load.requests",
            r"greater than 0; got 0",
        ),
        (
            {"load": {"rate": [1], "duration_s": -1}},
            "bench.load.duration_s",
            r"greater than 0; got -1",
        ),
        (
            {"load": {"rate": [1], "requests": 8, "duration_s": 5}},
            "bench.load.duration_s",
            r"either requests or duration_s",
        ),
        (
            {"slo": {"ttft_p99_s": 1.0}},
            "bench.slo",
            r"an SLO needs load levels: add \[bench\.load\]",
        ),
        (
            {"load": {"rate": [1], "search": "max_rate"}},
            "bench.load.search",
            r"needs an SLO: add \[bench\.slo\]",
        ),
        (
            {"load": {"concurrency": [1], "search": "max_rate"}, "slo": {"e2e_p99_s": 2}},
            "bench.load.search",
            r"starts from the rate levels",
        ),
        ({"load": {"rate": [1], "search": "min_rate"}}, "bench.load.search", r"'max_rate'"),
        ({"load": {"rate": [1]}, "slo": {}}, "bench.slo", r"at least one of ttft_p99_s"),
        (
            {"load": {"rate": [1]}, "slo": {"ttft_p99_s": 0}},
            "bench.slo.ttft_p99_s",
            r"greater than 0",
        ),
        ({"load": {"rate": [1]}, "slo": {"ttft_p99": 1}}, "bench.slo.ttft_p99", r"unknown key"),
        (
            {"load": {"rate": [1], "slo_attainment": 1.5}},
            "bench.load.slo_attainment",
            r"less than or equal to 1",
        ),
        ({"load": {"rate": [1], "workload": "coding"}}, "bench.load.workload", r"'short'"),
    ],
)
def test_bad_load_tables_name_the_key(table: dict, key: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as info:
        BenchMatrix.from_dict(table)
    assert info.value.key == key
    assert str(info.value).startswith(key + ":") or str(info.value).startswith("unknown key " + key)
    assert "\n" not in str(info.value)


def test_direct_construction_validates_too() -> None:
    with pytest.raises(ValidationError):
        LoadTable(concurrency=[0])
    with pytest.raises(ValidationError):
        LoadTable()
