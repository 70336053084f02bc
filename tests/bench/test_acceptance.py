"""Acceptance length per server kind, from recorded SGLang/vLLM/ddtune response and metrics fixtures."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ddtune.bench import acceptance as acc
from ddtune.bench.client import RequestSpec, StreamRecord, stream_request
from ddtune.engines import get_engine
from ddtune.engines.vllm import counter_acceptance


def test_vllm_counters_parse_and_diff(fixtures_dir: Path) -> None:
    before = acc.parse_prometheus((fixtures_dir / "vllm_metrics_before.txt").read_text())
    after = acc.parse_prometheus((fixtures_dir / "vllm_metrics_after.txt").read_text())
    # summed over both engines
    assert before["vllm:spec_decode_num_drafts_total"] == 2000.0
    assert after["vllm:spec_decode_num_accepted_tokens_total"] == 5000.0
    value, note = counter_acceptance(before, after)
    assert value == pytest.approx(1 + 1000 / 400)  # 1 + accepted diff / drafts diff
    assert "1000 accepted tokens over 400 drafts" in note
    # the cumulative figure (which includes earlier traffic and warmup) would differ
    assert value != pytest.approx(1 + 5000 / 2400)


def test_vllm_unavailable_cases(fixtures_dir: Path) -> None:
    before = acc.parse_prometheus((fixtures_dir / "vllm_metrics_before.txt").read_text())
    after = acc.parse_prometheus((fixtures_dir / "vllm_metrics_after.txt").read_text())
    assert counter_acceptance(before, before)[0] is None  # no drafts in between
    value, note = counter_acceptance(after, before)
    assert value is None and "went down" in note
    assert counter_acceptance(None, after)[0] is None


def test_counter_without_total_suffix() -> None:
    samples = {"vllm:spec_decode_num_drafts": 10.0, "vllm:spec_decode_num_accepted_tokens": 15.0}
    assert counter_acceptance({}, samples)[0] == pytest.approx(2.5)


@pytest.mark.parametrize(
    ("kind", "fixture", "path_expected", "value", "weight"),
    [
        ("sglang", "sglang_generate_stream.txt", "/generate", 9 / 4, 4.0),
        ("ddtune", "ddtune_completions_stream.txt", "/v1/completions", 8 / 3, 3.0),
        ("vllm", "vllm_completions_stream.txt", "/v1/completions", None, 0.0),
    ],
)
def test_per_response_acceptance_from_recorded_streams(
    fake_server_cls, kind: str, fixture: str, path_expected: str, value, weight: float
) -> None:
    with fake_server_cls(kind=kind, replay=fixture) as server, httpx.Client() as client:
        record = stream_request(
            client,
            server.url,
            get_engine(kind),
            RequestSpec("short", 0, "def f(xs):\n", 16),
            model="m",
            temperature=0.0,
            ignore_eos=True,
        )
        assert server.bodies[0]["path"] == path_expected
    got, got_weight = get_engine(kind).response_acceptance(record)
    assert got == (pytest.approx(value) if value is not None else None)
    assert got_weight == weight


def test_pooled_acceptance_weights_by_rounds() -> None:
    # 2 rounds at 4.0 and 6 rounds at 2.0: (8 + 12) / 8 tokens per round
    assert acc.pooled_acceptance([(4.0, 2.0), (2.0, 6.0), (None, 0.0)]) == pytest.approx(2.5)
    assert acc.pooled_acceptance([(None, 0.0)]) is None


def test_no_stats_is_unavailable_not_guessed() -> None:
    record = StreamRecord(text="x", output_tokens=5, usage={"completion_tokens": 5})
    assert get_engine("ddtune").response_acceptance(record) == (None, 0.0)
    assert get_engine("openai").response_acceptance(record) == (None, 0.0)
    sglang = StreamRecord(meta_info={"completion_tokens": 5})
    assert get_engine("sglang").response_acceptance(sglang) == (None, 0.0)
