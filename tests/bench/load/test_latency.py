"""Latency arithmetic: percentiles, per-token gaps, SLO checks, goodput, serialisation."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ddtune.bench.load.latency import (
    Distribution,
    LevelResult,
    meets_slo,
    per_token_gaps,
    percentile,
    request_figures,
    spread_tokens,
    summarize_level,
)


@pytest.mark.parametrize("n", [1, 2, 7, 100, 1001])
def test_percentile_is_linear_interpolation_like_numpy(n: int) -> None:
    rng = random.Random(n)
    values = [rng.lognormvariate(0, 1) for _ in range(n)]
    for q in (0, 1, 50, 90, 99, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-12)
    with pytest.raises(ValueError):
        percentile([], 50)


def test_distribution_of_values() -> None:
    d = Distribution.of([1.0, 2.0, 3.0, 4.0, 10.0])
    assert d is not None and d.n == 5 and d.mean == 4.0 and d.p50 == 3.0
    assert d.p90 == pytest.approx(4 + 0.6 * 6) and d.p99 == pytest.approx(4 + 0.96 * 6)
    assert Distribution.of([]) is None


def test_per_token_gaps_from_cumulative_counts() -> None:
    # chunks at 0.10, 0.13, 0.16 s carrying 3, 3 and 2 tokens
    gaps = per_token_gaps([0.10, 0.13, 0.16], [3, 6, 8], 8)
    assert gaps == pytest.approx([0.01, 0.01, 0.01, 0.015, 0.015])


def test_per_token_gaps_spread_evenly_without_counts() -> None:
    assert spread_tokens(8, 3) == [2, 3, 3] and sum(spread_tokens(32, 11)) == 32
    assert spread_tokens(2, 4) == [1, 1, 1, 1]  # at least one token per chunk
    gaps = per_token_gaps([0.10, 0.13, 0.16], [], 8)
    assert gaps == pytest.approx([0.01] * 6)
    assert per_token_gaps([0.1, 0.2, 0.4], [], 3) == pytest.approx([0.1, 0.2])  # one per chunk
    assert per_token_gaps([0.1], [], 1) == []


def test_request_figures_carry_the_lag() -> None:
    row = request_figures(0.05, 0.25, [0.05, 0.15, 0.25], [], 3, lag_s=0.5)
    assert row["ttft_s"] == pytest.approx(0.55) and row["e2e_s"] == pytest.approx(0.75)
    assert row["tpot_s"] == pytest.approx(0.1) and row["itl_p99_s"] == pytest.approx(0.1)
    assert row["chunk_gaps_s"] == pytest.approx([0.1, 0.1]) and row["chunks"] == 3


def _row(sent: float, ttft: float, e2e: float, tokens: int = 10, itl: float = 0.01, **extra):
    return {
        "sent_s": sent,
        "lag_s": 0.0,
        "ttft_s": ttft,
        "e2e_s": e2e,
        "output_tokens": tokens,
        "itl_s": [itl] * (tokens - 1),
        "chunk_gaps_s": [itl] * (tokens - 1),
        "itl_p99_s": itl,
        "tpot_s": itl,
        "error": None,
        **extra,
    }


def test_meets_slo_checks_every_given_target() -> None:
    row = _row(0.0, 0.2, 1.0, itl=0.05)
    assert meets_slo(row, {"ttft": 0.2, "e2e": 1.0, "itl": 0.05})  # limits are inclusive
    assert not meets_slo(row, {"ttft": 0.19})
    assert not meets_slo(row, {"itl": 0.04})
    assert not meets_slo(row, {"e2e": 0.9})
    assert meets_slo(row, {"ttft": 1.0})  # only the given targets count
    failed = {**row, "error": "HTTP 500", "ttft_s": None}
    assert not meets_slo(failed, {"e2e": 100.0})


def test_goodput_and_aggregates_of_a_level() -> None:
    slo = {"ttft": 0.5}
    rows = [
        _row(0.0, 0.1, 1.0, tokens=10, meets_slo=True),
        _row(0.5, 0.2, 1.5, tokens=20, meets_slo=True),
        _row(1.0, 0.9, 1.0, tokens=30, meets_slo=False),  # too slow a first token
        {**_row(1.5, 0.0, 0.5), "ttft_s": None, "error": "HTTP 500: boom", "meets_slo": False},
    ]
    level = summarize_level(LevelResult("c2", "closed", 2, None), rows, slo)
    assert level.status == "done" and level.requests == 4 and level.failed == 1
    assert level.window_s == pytest.approx(2.0)  # first send 0.0 -> last end 2.0
    assert level.output_tps == pytest.approx(60 / 2.0)  # failed request: no tokens
    assert level.request_rate == pytest.approx(3 / 2.0)
    assert level.slo_attainment == pytest.approx(2 / 4)  # the failure counts against it
    assert level.goodput_rps == pytest.approx(2 / 2.0)
    assert level.goodput_tps == pytest.approx(30 / 2.0)
    assert level.ttft_s is not None and level.ttft_s.n == 3 and level.ttft_s.p50 == 0.2
    assert level.itl_s is not None and level.itl_s.n == 9 + 19 + 29
    assert any("1 of 4 requests failed: HTTP 500: boom" in n for n in level.notes)


def test_a_level_where_every_request_failed_is_failed_not_zero_latency() -> None:
    rows = [
        {
            "sent_s": 0.0,
            "lag_s": 0.0,
            "e2e_s": 0.01,
            "ttft_s": None,
            "error": "HTTP 503: overloaded",
        }
    ] * 3
    level = summarize_level(LevelResult("c4", "closed", 4, None), rows, {"ttft": 1.0})
    assert level.status == "failed" and level.error == "HTTP 503: overloaded"
    assert level.failed == 3 and level.output_tps is None and level.ttft_s is None
    assert level.slo_attainment is None and level.goodput_rps is None
    again = LevelResult.from_dict(level.to_dict())
    assert again == level


def test_serialised_server_is_told_apart_from_a_batching_one() -> None:
    # four requests sent at once; a serial server generates them one after the other
    serial = [_row(0.0, 1.0 * i + 0.1, 1.0 * (i + 1)) for i in range(4)]
    batched = [_row(0.0, 0.1, 1.0) for _ in range(4)]
    a = summarize_level(LevelResult("c4", "closed", 4, None), serial, None)
    b = summarize_level(LevelResult("c4", "closed", 4, None), batched, None)
    assert a.in_flight == pytest.approx(2.5) and a.parallelism == pytest.approx(1.0)
    assert a.serialised and not b.serialised
    assert b.parallelism == pytest.approx(4.0)
    # a batching server with a long prefill: short streams, but they overlap
    slow_prefill = [_row(0.0, 1.0, 1.1) for _ in range(2)]
    c = summarize_level(LevelResult("c2", "closed", 2, None), slow_prefill, None)
    assert c.parallelism == pytest.approx(2.0) and not c.serialised
    single = summarize_level(LevelResult("c1", "closed", 1, None), serial[:1], None)
    assert not single.serialised  # one request in flight: nothing to serialise
    assert LevelResult.from_dict(a.to_dict()) == a
