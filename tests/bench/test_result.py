"""Per-request samples and the workload's decode rate: a stream sent at once is marked, and
one such request cannot swing the workload's figure."""

from __future__ import annotations

import pytest

from ddtune.bench.client import StreamRecord
from ddtune.bench.result import (
    MIN_CHUNK_GAP_S,
    MIN_DECODE_S,
    make_sample,
    pooled_decode_rate,
    throughput_aggregates,
)


def sample(
    tokens: int, ttft: float, e2e: float, workload: str = "short", prompt: int | None = None
) -> dict:
    record = StreamRecord(
        text="x" * tokens, ttft_s=ttft, e2e_s=e2e, output_tokens=tokens, prompt_tokens=prompt
    )
    return make_sample(workload, 0, record, None)


def test_a_stream_sent_at_once_is_marked() -> None:
    burst = sample(48, ttft=0.35, e2e=0.35 + MIN_DECODE_S / 2)  # 47 tokens within 0.5 ms
    assert burst["sent_at_once"] and burst["decode_tps"] > 90_000
    steady = sample(48, ttft=0.35, e2e=0.35 + 0.47)
    assert not steady["sent_at_once"]
    assert steady["decode_tps"] == pytest.approx(100.0)
    assert steady["itl_s"] == pytest.approx(0.01)
    assert sample(1, ttft=0.2, e2e=0.2)["decode_tps"] is None  # one token: nothing to decode


def test_the_workload_rate_pools_tokens_and_seconds() -> None:
    rows = [sample(11, 0.1, 0.1 + 0.1), sample(31, 0.1, 0.1 + 1.0)]  # 100 and 30 tok/s
    assert pooled_decode_rate(rows) == pytest.approx(40 / 1.1)  # not the mean, 65
    assert pooled_decode_rate([]) is None


def test_one_burst_among_steady_requests_leaves_the_rate_alone() -> None:
    steady = [sample(48, 0.35, 0.35 + 0.35) for _ in range(7)]
    burst = sample(48, 0.35, 0.35 + 0.0008)  # vLLM's front end sent 46 chunks in 0.8 ms
    figures = throughput_aggregates([*steady, burst])
    assert figures["short_tps"] == pytest.approx(47 / 0.35)
    assert figures["long_tps"] is None


def test_streams_all_sent_at_once_count_over_their_whole_time() -> None:
    """Every stream of the workload held back and sent at once (vLLM's front end on a loaded
    CPU: a long workload's 2 requests read 24,006 tok/s): the rate is over request to last
    token, not the burst's microseconds."""
    held = [sample(48, 0.2, 0.2 + MIN_DECODE_S / 10) for _ in range(2)]
    assert pooled_decode_rate(held) == pytest.approx(94 / (2 * (0.2 + MIN_DECODE_S / 10)))
    assert pooled_decode_rate(held) < 47 / 0.2  # no higher than decoding the whole time


def test_streams_held_back_among_timed_ones_are_left_out() -> None:
    """A bench measured on vLLM with its front end short of CPU: 3 of 4 streams' first tokens
    came 0.19-0.24 s after the request and the rest 2-33 ms later; the fourth streamed from
    0.02 s. The workload read 804 tok/s against 210-240 for the benches around it."""
    rows = [  # with that bench's prompt sizes
        sample(48, 0.2351, 0.2367, prompt=87),
        sample(48, 0.2238, 0.2254, prompt=78),
        sample(48, 0.1891, 0.2219, prompt=65),
        sample(48, 0.0224, 0.2201, prompt=77),
    ]
    assert pooled_decode_rate(rows) == pytest.approx(47 / (0.2201 - 0.0224))
    for row in rows:  # prompt sizes unknown: only a stream sent at once is judged held
        row["prompt_tokens"] = None
    assert pooled_decode_rate(rows) == pytest.approx(47 * 4 / (0.0016 + 0.0016 + 0.0328 + 0.1977))
    # a long prompt's later first token is its prefill, not a held stream
    long_prompt = sample(48, 0.30, 0.30 + 0.2, prompt=2000)
    short = [sample(48, 0.02, 0.02 + 0.2, prompt=100) for _ in range(2)]
    assert pooled_decode_rate([*short, long_prompt]) == pytest.approx(47 * 3 / 0.6)


def test_streams_flushed_chunk_after_chunk_are_held_back_too() -> None:
    """A bench of plain decoding on vLLM (head to head, run 6): each of 4 streams, sent one at
    a time, got its first token after 0.150-0.152 s and its other 47 chunks within 1.0-1.2 ms
    (26 µs apart). Over 1 ms, so not "at once" by the whole decode; the workload read 39,405
    tok/s where the benches around it read 300-360. By the chunks' gaps every stream was held
    back, so all four count over their whole time."""
    rows = []
    for ttft, e2e, size in (
        (0.1504, 0.1516, 87),
        (0.1508, 0.1518, 78),
        (0.1511, 0.1523, 65),
        (0.1522, 0.1534, 77),
    ):
        chunks = [ttft + (e2e - ttft) * i / 46 for i in range(47)]
        record = StreamRecord(
            text="x" * 48,
            ttft_s=ttft,
            e2e_s=e2e,
            output_tokens=48,
            chunk_times_s=chunks,
            prompt_tokens=size,
        )
        rows.append(make_sample("short", 0, record, None))
    assert all(row["sent_at_once"] for row in rows)
    assert pooled_decode_rate(rows) == pytest.approx(4 * 47 / (0.1516 + 0.1518 + 0.1523 + 0.1534))
    assert 300 < pooled_decode_rate(rows) < 320
    steady = StreamRecord(
        text="x" * 48,
        ttft_s=0.02,
        e2e_s=0.02 + 46 * MIN_CHUNK_GAP_S * 1.5,
        output_tokens=48,
        chunk_times_s=[0.02 + i * MIN_CHUNK_GAP_S * 1.5 for i in range(47)],
    )
    assert not make_sample("short", 0, steady, None)["sent_at_once"]  # fast, but streamed


def test_a_workload_held_back_whole_is_judged_by_the_other_workloads_first_tokens() -> None:
    """A bench of plain decoding on vLLM (DFlash head to head, 7 December 2026): every short
    stream's first token came after 0.19-0.32 s, 3 of them sent at once and the fourth's 47
    tokens within 51 ms, while the long workload's 233-300-token prompts got their first
    tokens after 0.023-0.027 s. Judged within its workload, the fourth stream looked timed
    and the workload read 914 tok/s (the benches around it: 160-220). The long prompts bound
    a short prompt's prefill, so all four short streams were held back: they count over
    their whole time."""
    short = [
        sample(48, 0.3239, 0.3254, prompt=87),
        sample(48, 0.2383, 0.2394, prompt=78),
        sample(48, 0.1868, 0.2382, prompt=65),
        sample(48, 0.2372, 0.2381, prompt=77),
    ]
    long = [
        sample(48, 0.0266, 0.2540, "long", prompt=300),
        sample(48, 0.0230, 0.2236, "long", prompt=233),
    ]
    assert pooled_decode_rate(short) == pytest.approx(47 / (0.2382 - 0.1868))  # ~914
    figures = throughput_aggregates([*short, *long])
    assert figures["short_tps"] == pytest.approx(4 * 47 / (0.3254 + 0.2394 + 0.2382 + 0.2381))
    assert figures["short_tps"] < 200
    assert figures["long_tps"] == pytest.approx(2 * 47 / (0.2540 - 0.0266 + 0.2236 - 0.0230))
