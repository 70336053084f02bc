"""The method vocabulary (`ddtune.methods`): knobs, the rules the installed engines state,
and each engine's spelling, checked against the engines' own names (SGLang 0.5.23's parser
options, recorded in tests/engines/fixtures/sglang_engine_info.json; vLLM 0.32's methods)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ddtune.errors import UserError
from ddtune.methods import (
    METHOD_ENGINES,
    METHOD_NAMES,
    METHODS,
    SGLANG_FLAGS,
    MethodConfig,
    method,
    sglang_flags,
    sglang_reported,
    vllm_speculative_config,
)
from ddtune.params import DecodeParams
from ddtune.sweep.spec.schema import SpaceTable

FIXTURES = Path(__file__).parent / "engines" / "fixtures"


def build(name: str, **knobs: object) -> MethodConfig:
    return MethodConfig.build(name, knobs)


def test_every_sglang_flag_is_one_sglangs_parser_knows():
    options = json.loads((FIXTURES / "sglang_engine_info.json").read_text())["options"]
    for knob, flag in SGLANG_FLAGS.items():
        assert options.get(flag) == flag[2:].replace("-", "_"), (knob, flag)


def test_every_method_has_a_space_table_and_a_spelling_per_engine():
    assert set(METHOD_NAMES) <= set(SpaceTable.model_fields)
    for found in METHODS.values():
        for engine, knobs in found.engine_knobs.items():
            assert engine in METHOD_ENGINES and set(knobs) <= set(found.knob_names()), found.name
    assert method("nextn").name == "mtp"  # SGLang's name for it


def test_a_knob_the_method_lacks_is_refused_naming_its_knobs():
    with pytest.raises(UserError) as error:
        MethodConfig.build("eagle3", {"budget": 8}, "configs.0")
    assert str(error.value) == (
        "configs.0.budget: method eagle3 has no knob 'budget'; its knobs: num_steps, topk, "
        "num_draft_tokens, drafter"
    )
    with pytest.raises(UserError, match="unknown method 'medusa'; expected one of ar, dflash"):
        method("medusa")


@pytest.mark.parametrize(
    ("name", "knobs", "message"),
    [
        ("eagle", {"num_steps": 0}, "num_steps must be between 1 and 64; got 0"),
        ("eagle", {"num_steps": 3, "topk": 1, "num_draft_tokens": 6}, "must be num_steps + 1 (4)"),
        (
            "ngram",
            {"prompt_lookup_min": 4, "prompt_lookup_max": 2},
            "prompt_lookup_min (4) is above",
        ),
        ("ngram", {"min_bfs_breadth": 5, "max_bfs_breadth": 2}, "min_bfs_breadth (5) is above"),
        ("dflash", {"block_size": True}, "block_size must be an integer"),
        ("dflash", {"drafter": ""}, "drafter must be a path"),
    ],
)
def test_the_methods_own_rules(name, knobs, message):
    with pytest.raises(UserError, match=re.escape(message)):
        MethodConfig.build(name, knobs)


def test_topk_1_fills_in_the_draft_tokens_sglang_would_use():
    assert build("eagle3", num_steps=3, topk=1).get("num_draft_tokens") == 4


@pytest.mark.parametrize(
    ("config", "engine", "window", "message"),
    [
        (("ddtree", {}), "vllm", None, "vllm has no method 'ddtree'; it runs ar, dflash, eagle"),
        (
            ("mtp", {"num_steps": 2}),
            "ddtune",
            None,
            "ddtune has no method 'mtp'; it runs ar, dflash, ddtree",
        ),
        (
            ("eagle", {"num_steps": 3, "drafter": "d"}),
            "sglang",
            None,
            "all set or none (given: num_steps)",
        ),
        (
            ("eagle3", {"num_steps": 3, "topk": 4, "num_draft_tokens": 8, "drafter": "d"}),
            "vllm",
            None,
            "vllm cannot set topk, num_draft_tokens for eagle3 (it takes num_steps, drafter)",
        ),
        (("ngram", {"prompt_lookup_max": 3}), "vllm", None, "vLLM's ngram needs num_draft_tokens"),
        (
            ("ngram", {"prompt_lookup_max": 3, "num_draft_tokens": 4}),
            "sglang",
            None,
            "sglang cannot set prompt_lookup_max for ngram",
        ),
        (("dflash", {"block_size": 8}), "sglang", None, "sglang's dflash needs drafter"),
        (
            ("dflash", {"block_size": 16, "drafter": "d"}),
            "sglang",
            8,
            "window >= block_size (8 < 16)",
        ),
        (("dflash", {"block_size": 8}), "ddtune", None, "ddtune cannot set block_size for dflash"),
    ],
)
def test_what_one_engine_cannot_run_is_refused_naming_what_it_takes(
    config, engine, window, message
):
    with pytest.raises(UserError, match=re.escape(message)):
        build(config[0], **config[1]).check_for(engine, window)


def test_sglang_spelling_and_what_its_server_reports():
    eagle3 = build("eagle3", num_steps=3, topk=1, drafter="/d")
    assert sglang_flags(eagle3, None, None) == [
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
        "--speculative-num-draft-tokens", "4", "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1",
    ]  # fmt: skip
    mtp = build("nextn", num_steps=2, topk=1)
    assert sglang_reported(mtp)["speculative_algorithm"] == "EAGLE"  # SGLang resolves NEXTN
    assert sglang_flags(mtp, None, None)[:2] == ["--speculative-algorithm", "NEXTN"]
    dflash = build("dflash", block_size=8, drafter="/d")
    assert sglang_flags(dflash, "--speculative-draft-window-size", 64)[-2:] == [
        "--speculative-draft-window-size", "64"
    ]  # fmt: skip
    assert sglang_flags(build("ar"), None, None) == []


def test_vllm_spelling():
    assert vllm_speculative_config(build("ar")) is None
    assert vllm_speculative_config(build("ngram", num_draft_tokens=4, prompt_lookup_max=3)) == {
        "method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3
    }  # fmt: skip
    dflash = build("dflash", block_size=8, drafter="/d")  # the block holds the bonus token
    assert vllm_speculative_config(dflash) == {
        "method": "dflash", "num_speculative_tokens": 7, "model": "/d"
    }  # fmt: skip
    assert vllm_speculative_config(build("mtp", num_steps=1)) == {
        "method": "mtp", "num_speculative_tokens": 1
    }  # fmt: skip


def test_a_config_naming_ar_dflash_or_ddtree_alone_is_that_mode():
    for name in ("ar", "dflash", "ddtree"):
        named = DecodeParams.from_wire({"method": name, "budget": 8})
        assert named == DecodeParams.from_wire({"mode": name, "budget": 8})  # same hash
    with pytest.raises(UserError, match="method eagle3 runs as mode 'dflash'; got mode 'ddtree'"):
        DecodeParams.from_wire({"method": "eagle3", "mode": "ddtree"})


def test_a_method_config_round_trips_and_hashes_by_its_knobs():
    wire = {"method": "eagle3", "method_knobs": {"num_steps": 3, "topk": 1, "drafter": "/d"}}
    params = DecodeParams.from_wire(wire)
    assert params.label() == "eagle3 num_steps=3 topk=1 num_draft_tokens=4"
    assert DecodeParams.from_wire(params.to_wire()) == params
    other = DecodeParams.from_wire(
        {**wire, "method_knobs": {"num_steps": 5, "topk": 1, "drafter": "/d"}}
    )
    assert other.hash() != params.hash() and params.canonical().hash() == params.hash()
    assert DecodeParams("ddtree", 16, 4).to_wire() == {
        "mode": "ddtree",
        "budget": 16,
        "topk": 4,
        "window": "none",
    }


def test_a_vllm_speculative_config_reads_back_as_the_method_that_writes_it():
    from ddtune.methods import vllm_method_config

    dflash = {"method": "dflash", "model": "/d", "num_speculative_tokens": 15}
    config = vllm_method_config(dflash)
    assert config.name == "dflash" and config.get("block_size") == 16
    assert vllm_speculative_config(config) == dflash
    ngram = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2}
    assert dict(vllm_method_config(ngram).knobs) == {"num_draft_tokens": 4, "prompt_lookup_min": 2}
    with pytest.raises(UserError, match="'disable_by_batch_size' is not a knob of ddtune's ngram"):
        vllm_method_config({**ngram, "disable_by_batch_size": 8})
    with pytest.raises(UserError, match="vLLM method 'medusa' is not one of ddtune's methods"):
        vllm_method_config({"method": "medusa", "num_speculative_tokens": 2})
