"""Logit gaps from a completions `logprobs` object (ddtune.bench.logit_gaps)."""

from __future__ import annotations

import pytest

from ddtune.bench.logit_gaps import gap_entry, top_gap
from ddtune.engines import get_engine


def test_top_gap_is_top1_minus_top2_whatever_the_order() -> None:
    assert top_gap({"a": -2.0, "b": -0.5, "c": -0.7}) == pytest.approx(0.2)
    assert top_gap({"a": -0.3}) is None
    assert top_gap(None) is None


def test_gap_entry_keeps_offsets_gaps_and_agreement() -> None:
    logprobs = {
        "tokens": ["ab", "c", "d"],
        "top_logprobs": [{"ab": -0.1, "x": -3.1}, {"c": -0.6, "y": -0.8}, None],
        "text_offset": [0, 2, 3],
    }
    entry = gap_entry(logprobs, "abcd", "abcd")
    assert entry == {"offsets": [0, 2, 3], "gaps": [3.0, 0.2, None], "agree": 4}
    assert gap_entry(logprobs, "abcd", "abXd")["agree"] == 2  # parted from the streamed text


def test_logprobs_support_per_kind() -> None:
    support = {name: get_engine(name).supports_logprobs for name in ("ddtune", "vllm", "sglang")}
    assert support == {"ddtune": True, "vllm": True, "sglang": False}
    assert get_engine("openai").supports_logprobs is False
