"""A forecast: dominance among configs, and a trace refused for another bench or other weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddtune.bench.matrix import BenchMatrix
from ddtune.engines import get_engine
from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.trace.forecast import Forecast, build_forecast, check_requests, identity_mismatch
from ddtune.trace.predict import Trace
from ddtune.trace.record import TraceSettings, record_trace
from ddtune.trace.round_cost import Shape
from ddtune.trace.sources import requests_from_matrix

MATRIX = BenchMatrix.from_dict(
    {
        "temperature": 0,
        "short": {"n_prompts": 1, "prompt_tokens": 8, "max_tokens": 12, "repeats": 2},
        "long": {"n_prompts": 1, "prompt_tokens": 16, "max_tokens": 12, "repeats": 1},
        "coding": {"enabled": False},
        "chars_per_token": 1.0,
    }
)


def forecast(shapes):
    return Forecast(shapes, dict.fromkeys(shapes), lambda label: label)


def test_dominance_needs_no_fewer_tokens_a_round_at_no_lower_cost():
    s = lambda mode, verify, share, tokens: {"short": Shape(mode, tokens, verify, share)}  # noqa: E731
    f = forecast(
        {
            "small": s("ddtree", 5, 1.0, 3.0),
            "big": s("ddtree", 17, 1.0, 2.9),  # more verify tokens, fewer tokens a round
            "bigger": s("ddtree", 33, 1.0, 3.5),  # more tokens a round: could win
            "windowed": s("ddtree", 17, 0.5, 2.9),  # cheaper drafter than "big"
            "chain": s("dflash", 8, 1.0, 2.0),
        }
    )
    assert f.dominates("small", "big")
    assert not f.dominates("small", "bigger") and not f.dominates("big", "small")
    assert f.dominates("windowed", "big") and not f.dominates("big", "windowed")
    assert not f.dominates("small", "chain")  # another mode: another fixed cost
    assert not f.dominates("small", "small")


@pytest.fixture(scope="module")
def bench_trace(sides, tmp_path_factory):
    side = sides("qwen3", 4)
    folder = tmp_path_factory.mktemp("trace")
    requests, prompt_hash = requests_from_matrix(MATRIX)
    record_trace(side, requests, folder, TraceSettings((None,), (), 4), "engine", prompt_hash)
    return Trace.read(folder)


def test_a_trace_of_the_bench_is_accepted_and_counts_repeats(bench_trace):
    check_requests(bench_trace, MATRIX)
    assert [r.count for r in bench_trace.header.requests] == [2, 1]
    kind = get_engine("ddtune")
    f = build_forecast(
        bench_trace, {"b8": DecodeParams("ddtree", 8, 4), "ar": DecodeParams("ar")}, kind
    )
    assert set(f.shapes["b8"]) == {"short", "long"}
    assert f.shapes["ar"]["short"].verify_tokens == 1 and f.acceptance["b8"] > 1.0


def test_a_trace_of_other_requests_is_refused(bench_trace):
    other = MATRIX.model_copy(update={"seed": 7})
    with pytest.raises(UserError, match="recorded for other requests"):
        check_requests(bench_trace, other)


def test_other_weights_are_named_and_the_forecast_keeps_as_json(bench_trace):
    params = {"b8": DecodeParams("ddtree", 8, 4), "ar": DecodeParams("ar")}
    f = build_forecast(bench_trace, params, get_engine("ddtune"))
    sha = bench_trace.header.target.sha256
    assert identity_mismatch(f, {"target_sha256": sha}) is None
    assert "target" in identity_mismatch(f, {"target_sha256": "0" * 64})
    assert identity_mismatch(f, {}) is None  # a kind that reports no weights
    again = Forecast.from_json(f.to_json(), f.cost)
    assert again.shapes == f.shapes and again.acceptance == f.acceptance
    assert again.weights == f.weights and again.cost("ar") < again.cost("b8")


def test_a_served_model_folder_of_another_name_is_named_at_ready(bench_trace):
    """vLLM names its model (`/v1/models`), SGLang its model path (`/server_info`): where the
    service's folders cannot be read from here, the folder names are what can be checked."""
    f = build_forecast(bench_trace, {"ar": DecodeParams("ar")}, get_engine("vllm"))
    traced = Path(bench_trace.header.target.path)
    assert identity_mismatch(f, {"models": [f"/remote/{traced.name}"]}) is None
    assert identity_mismatch(f, {"models": ["t"]}) is None  # an alias says nothing
    why = identity_mismatch(f, {"models": ["/remote/Kimi-K2"]})
    assert why is not None and "reports the target /remote/Kimi-K2" in why
    sglang = {"server_info": {"model_path": "/m/x", "speculative_draft_model_path": "/m/d"}}
    assert "reports the target /m/x" in identity_mismatch(f, sglang)
