"""The load generator against a loopback server with known latency distributions."""

from __future__ import annotations

import math
import statistics

import pytest
from scipy import stats

from ddtune.bench import BenchMatrix, run_bench
from ddtune.bench.load.generator import poisson_arrivals
from ddtune.bench.load.latency import LevelResult, percentile
from ddtune.bench.load.search import search_max_rate
from ddtune.errors import UserError

OFF = {"enabled": False}


def load_matrix(load: dict, slo: dict | None = None, max_tokens: int = 16) -> BenchMatrix:
    """Load levels only (no single-stream workloads), two short prompts."""
    table = {
        "short": {"enabled": False, "n_prompts": 2, "prompt_tokens": 20, "max_tokens": max_tokens},
        "long": OFF,
        "coding": OFF,
        "load": load,
    }
    return BenchMatrix.from_dict(table if slo is None else {**table, "slo": slo})


def levels(result) -> dict[str, LevelResult]:
    return {d["key"]: LevelResult.from_dict(d) for d in result.load_result["levels"]}


def test_percentiles_match_the_known_distribution_within_5_percent(
    load_server, load_server_process
) -> None:
    _, latency = load_server
    # times well above the scheduling noise of a loaded 2-core machine (a few ms); p90 and p99
    # fall inside the tails, p50 on the fixed part
    heavy = latency(
        ttft_s=0.5,
        ttft_tail_p=0.2,
        ttft_tail_s=1.2,
        token_s=0.08,
        tail_p=0.15,
        tail_s=0.3,
        seed=3,
    )
    # one warm-up request per client: connection set-up is not the server's latency
    matrix = load_matrix({"concurrency": [8], "requests": 48, "warmup_requests": 8}, max_tokens=8)
    with load_server_process(heavy) as (url, server_stats):
        result = run_bench(url, matrix, progress=False)
        seen = server_stats()
    # the eight warm-up requests are the first eight the server saw (all sent at once)
    intended = [i for i in seen["intended"] if i["number"] >= 8]
    busiest = seen["max_generating"]
    level = levels(result)["c8"]
    assert level.status == "done" and level.requests == 48 == len(intended)
    assert busiest == 8  # closed loop: eight requests in flight, never more
    ttft = [i["ttft"] for i in intended]
    gaps = [g for i in intended for g in i["gaps"]]
    e2e = [i["ttft"] + sum(i["gaps"]) for i in intended]
    assert percentile(gaps, 99) > 2 * percentile(gaps, 50)  # the tail is really heavy
    for measured, truth in ((level.ttft_s, ttft), (level.itl_s, gaps), (level.e2e_s, e2e)):
        assert measured is not None and measured.n == len(truth)
        for q, value in ((50, measured.p50), (90, measured.p90), (99, measured.p99)):
            assert value == pytest.approx(percentile(truth, q), rel=0.05), q
        assert measured.mean == pytest.approx(statistics.fmean(truth), rel=0.05)
    rows = [r for r in result.load_result["requests"] if r["level"] == "c8"]
    assert len(rows) == 48 and all(r["output_tokens"] == 8 for r in rows)
    assert level.output_tps == pytest.approx(48 * 8 / level.window_s)
    assert level.client_cpu_s is not None and level.client_cpu_share is not None


def test_per_token_gaps_when_chunks_carry_several_tokens(load_server) -> None:
    server_cls, latency = load_server
    chunky = latency(ttft_s=0.02, token_s=0.04, tokens_per_chunk=3)  # 120 ms per chunk
    matrix = load_matrix({"concurrency": [2], "requests": 6, "warmup_requests": 1}, max_tokens=12)
    with server_cls(chunky, kind="ddtune") as server:
        level = levels(run_bench(server.url, matrix, progress=False))["c2"]
    assert level.itl_chunk_s is not None and level.itl_s is not None
    assert level.itl_chunk_s.n == 6 * 3 and level.itl_chunk_s.p50 == pytest.approx(0.12, rel=0.1)
    assert level.itl_s.n == 6 * 9 and level.itl_s.p50 == pytest.approx(0.04, rel=0.1)
    assert level.acceptance_length == pytest.approx(3.0)  # usage.spec: 12 tokens in 4 rounds
    assert level.warmup == 1 and level.requests == 6


def test_poisson_arrivals_are_seeded_and_exponential() -> None:
    def take(seed: str, n: int) -> list[float]:
        it = poisson_arrivals(2.0, seed)
        return [next(it) for _ in range(n)]

    times = take("0:r2", 20001)
    assert times[0] == 0.0 and times == take("0:r2", 20001) and times != take("1:r2", 20001)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(0.5, rel=0.03)
    assert statistics.stdev(gaps) / mean == pytest.approx(1.0, rel=0.03)  # CV of an exponential
    assert stats.kstest(gaps, "expon", args=(0, 0.5)).pvalue > 0.001
    counts = [0] * int(times[-1])  # arrivals per one-second window: Poisson(2)
    for t in times:
        if t < len(counts):
            counts[int(t)] += 1
    assert statistics.fmean(counts) == pytest.approx(2.0, rel=0.05)
    assert statistics.variance(counts) == pytest.approx(2.0, rel=0.1)


def test_open_loop_sends_on_the_schedule(load_server, load_server_process) -> None:
    _, latency = load_server
    matrix = load_matrix({"rate": [25], "requests": 30, "warmup_requests": 2}, max_tokens=4)
    fast = latency(ttft_s=0.01, token_s=0.002)
    with load_server_process(fast) as (url, server_stats):
        result = run_bench(url, matrix, progress=False)
        arrivals = server_stats()["arrivals"]
    arrived = [t - arrivals[0] for t in arrivals]
    level = levels(result)["r25"]
    it = poisson_arrivals(25.0, f"{matrix.seed}:r25")
    schedule = [next(it) for _ in range(32)]
    assert len(arrived) == 32
    assert max(abs(a - s) for a, s in zip(sorted(arrived), schedule, strict=True)) < 0.05
    assert level.max_lag_s < 0.05 and level.requests == 30
    sent = sorted(r["sent_s"] for r in result.load_result["requests"])
    assert sent == pytest.approx(schedule[2:])  # the warm-up arrivals are not measured


def test_a_serialising_server_is_detected(load_server) -> None:
    server_cls, latency = load_server
    matrix = load_matrix({"concurrency": [1, 3], "requests": 6, "warmup_requests": 1}, max_tokens=8)
    serial = latency(ttft_s=0.02, token_s=0.01, serialise=True)
    with server_cls(serial) as server:
        found = levels(run_bench(server.url, matrix, progress=False))
    with server_cls(latency(ttft_s=0.02, token_s=0.01)) as server:
        batched = levels(run_bench(server.url, matrix, progress=False))
    assert found["c3"].serialised and not found["c1"].serialised
    assert found["c3"].parallelism is not None and found["c3"].parallelism < 1.15
    assert not batched["c3"].serialised and batched["c3"].parallelism > 1.5
    # queueing: the serial server's TTFT grows with concurrency, the batching one's does not
    assert found["c3"].ttft_s.p50 > 3 * found["c1"].ttft_s.p50
    assert batched["c3"].ttft_s.p50 < 2 * batched["c1"].ttft_s.p50


def test_a_level_where_every_request_fails_is_recorded_failed(load_server) -> None:
    server_cls, latency = load_server
    matrix = load_matrix(
        {"concurrency": [1, 2], "requests": 3, "warmup_requests": 1}, {"e2e_p99_s": 5.0}
    )
    with server_cls(latency(), fail_from=4) as server:  # c1: 1 warm-up + 3 measured
        result = run_bench(server.url, matrix, progress=False)
    found = levels(result)
    assert found["c1"].status == "done" and found["c1"].slo_attainment == 1.0
    bad = found["c2"]
    assert bad.status == "failed" and bad.failed == 3
    assert "HTTP 500" in bad.error and "injected overload" in bad.error
    assert bad.ttft_s is None and bad.output_tps is None and bad.goodput_rps is None
    rows = [r for r in result.load_result["requests"] if r["level"] == "c2"]
    assert all(r["error"] and r["ttft_s"] is None and not r["meets_slo"] for r in rows)


def test_without_a_load_table_nothing_changes(fake_server_cls) -> None:
    matrix = BenchMatrix.from_dict(
        {"coding": OFF, "logprob_gaps": False, "short": {"n_prompts": 1, "max_tokens": 4}}
    )
    with fake_server_cls() as server:
        result = run_bench(server.url, matrix, progress=False)
        posts = len(server.bodies)
    assert result.load_result is None and "load_result" in result.to_dict()
    assert posts == 2 + 1 * 2 + 2 * 2  # warm-up, short (1 prompt x 2), long (2 x 2)


def _level(rate: float, attainment: float) -> LevelResult:
    return LevelResult(f"r{rate:g}", "open", None, rate, slo_attainment=attainment)


@pytest.mark.parametrize(
    ("rates", "capacity", "low", "high"),
    [
        ([0.5, 1, 2, 4], 3.3, 3.0, 3.5),  # bracketed by the levels, bisected
        ([0.5, 1], 3.3, 3.0, 4.0),  # every level passes: doubled, then bisected
        ([8, 16], 3.3, 2.9, 4.0),  # every level fails: halved, then bisected
    ],
)
def test_max_rate_search_brackets_the_capacity(rates, capacity, low, high) -> None:
    probed: list[float] = []

    def run_rate(rate: float) -> LevelResult:
        probed.append(rate)
        return _level(rate, 1.0 if rate <= capacity else 0.5)

    measured = [_level(r, 1.0 if r <= capacity else 0.5) for r in rates]
    found = search_max_rate(run_rate, measured, 0.99, probes=6)
    assert len(probed) == 6 == len(found["probes"])
    assert low <= found["max_rate"] <= capacity < found["upper"] <= high
    assert "up to" in found["note"]


def test_max_rate_search_reports_when_nothing_passes() -> None:
    found = search_max_rate(lambda r: _level(r, 0.0), [_level(1.0, 0.0)], 0.99, probes=3)
    assert found["max_rate"] is None and math.isclose(found["upper"], 0.125)
    assert found["note"].startswith("no rate probed reached 99%")


def test_a_load_workload_without_prompts_fails_before_any_request(fake_server_cls, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "def f():\\n", "workload": "long"}\n')
    matrix = BenchMatrix.from_dict(
        {"prompts_file": str(prompts), "coding": OFF, "load": {"concurrency": [2]}}
    )
    with fake_server_cls() as server, pytest.raises(UserError) as info:
        run_bench(server.url, matrix, progress=False)
    assert info.value.key == "bench.load.workload" and server.bodies == []
