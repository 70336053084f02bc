"""The schedule type: strict wire form, picking a tier by the requests in flight, and how vLLM
(num_speculative_tokens_per_batch_size) and SGLang (adaptive config) take it."""

from __future__ import annotations

import json

import pytest

from ddtune.engines.schedule import (
    Schedule,
    Tier,
    read_schedule,
    sglang_adaptive,
    token_count,
    vllm_schedule,
)
from ddtune.errors import UserError
from ddtune.params import DecodeParams

DDTREE, AR, DFLASH = DecodeParams("ddtree", 16, 4), DecodeParams("ar"), DecodeParams("dflash")


def test_pick_by_requests_in_flight_and_the_wire_round_trip() -> None:
    schedule = Schedule((Tier(1, DDTREE), Tier(7, DecodeParams("ddtree", 8, 2)), Tier(None, AR)))
    assert [schedule.pick(n).params for n in (1, 2, 7, 8, 500)] == [
        DDTREE,
        DecodeParams("ddtree", 8, 2),
        DecodeParams("ddtree", 8, 2),
        AR,
        AR,
    ]
    assert [(a, b) for a, b, _ in schedule.ranges()] == [(1, 1), (2, 7), (8, None)]
    assert Schedule.from_wire(json.loads(json.dumps(schedule.to_wire()))) == schedule
    assert schedule.describe() == (
        "ddtree b16 k4 wnone for 1 concurrent requests, ddtree b8 k2 wnone for 2-7, ar for 8 and more"
    )


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        ([], "non-empty list"),
        ([{"max_concurrency": 4, "config": {"mode": "ar"}}], "last tier .* open-ended"),
        (
            [
                {"max_concurrency": 4, "config": {"mode": "ar"}},
                {"max_concurrency": 2, "config": {"mode": "ar"}},
                {"max_concurrency": None, "config": {"mode": "ar"}},
            ],
            "ascend",
        ),
        ([{"max_concurrency": 0, "config": {"mode": "ar"}}], "whole number >= 1"),
        ([{"max_concurrency": None, "config": {"mode": "ar", "beam": 3}}], "beam"),
        ([{"max_concurrency": None}], "max_concurrency"),
    ],
)
def test_bad_schedules_are_one_clear_line(wire, message) -> None:
    with pytest.raises(UserError, match=message):
        Schedule.from_wire(wire)


def test_load_schedule_reads_the_list_a_wrapper_or_results_json(tmp_path) -> None:
    wire = [{"max_concurrency": None, "config": DDTREE.to_wire()}]
    for i, data in enumerate([wire, {"schedule": wire}, {"report": {"schedule": wire}}]):
        path = tmp_path / f"s{i}.json"
        path.write_text(json.dumps(data))
        assert read_schedule(path) == Schedule.single(DDTREE)
    (tmp_path / "none.json").write_text(json.dumps({"report": {"schedule": None}}))
    with pytest.raises(UserError, match="holds no schedule"):
        read_schedule(tmp_path / "none.json")
    with pytest.raises(UserError, match="not found"):
        read_schedule(tmp_path / "missing.json")


def test_vllm_takes_a_token_count_schedule_as_per_batch_size_ranges() -> None:
    method = {"algorithm": "ngram", "prompt_lookup_max": 4}
    schedule = Schedule(
        (
            Tier(2, DFLASH, {**method, "K": 5}),
            Tier(8, DFLASH, {**method, "K": 2}),
            Tier(None, AR, {}),
        )
    )
    assert [token_count(t) for t in schedule.tiers] == [5, 2, 0]
    rendered = vllm_schedule(schedule)
    assert rendered.fields == {
        "num_speculative_tokens": 5,
        "num_speculative_tokens_per_batch_size": [[1, 2, 5], [3, 8, 2], [9, 1 << 16, 0]],
    }
    assert rendered.base is not None and rendered.base.vars["K"] == 5


def test_engines_refuse_what_they_cannot_switch_naming_why() -> None:
    mixed = Schedule((Tier(4, DDTREE), Tier(None, AR)))
    assert vllm_schedule(mixed).fields is None
    assert "names no token count" in (vllm_schedule(mixed).reason or "")
    other = Schedule((Tier(4, DFLASH, {"K": 4, "window": 8}), Tier(None, DFLASH, {"K": 2})))
    assert "differ in more than the token count" in (vllm_schedule(other).reason or "")
    assert "one config" in (vllm_schedule(Schedule.single(DFLASH, {"K": 3})).reason or "")
    ngram = Schedule((Tier(4, DFLASH, {"algorithm": "ngram", "K": 4}), Tier(None, AR)))
    assert "only EAGLE/EAGLE3" in (sglang_adaptive(ngram).reason or "")
    topk = Schedule(
        (Tier(4, DFLASH, {"algorithm": "eagle3", "K": 4, "eagle_topk": 4}), Tier(None, AR))
    )
    assert "topk 1" in (sglang_adaptive(topk).reason or "")


def test_sglang_adaptive_config_per_batch_size_tier() -> None:
    eagle = {"algorithm": "EAGLE3", "eagle_topk": 1}
    schedule = Schedule(
        (
            Tier(3, DFLASH, {**eagle, "steps": 5}),
            Tier(15, DFLASH, {**eagle, "steps": 2}),
            Tier(None, AR),
        )
    )
    rendered = sglang_adaptive(schedule)
    assert rendered.fields == {
        "speculative_adaptive": True,
        "speculative_adaptive_config": {
            "1": {"candidate_steps": [5]},
            "4": {"candidate_steps": [2]},
            "16": {"candidate_steps": [0]},
        },
    }


def method_params(name: str, **knobs: object) -> DecodeParams:
    return DecodeParams.from_wire({"method": name, "method_knobs": knobs})


def test_token_count_reads_the_methods_knob_before_any_var() -> None:
    """vLLM's num_speculative_tokens as the methods name it: eagle3's num_steps, ngram's
    num_draft_tokens, dflash's block_size - 1; a var only where no knob says it."""
    eagle3 = method_params("eagle3", num_steps=3, topk=1, drafter="/d")
    assert token_count(Tier(None, eagle3, {"K": 9})) == 3  # the knob wins over the var
    assert token_count(Tier(None, method_params("ngram", num_draft_tokens=4))) == 4
    assert token_count(Tier(None, method_params("dflash", block_size=8, drafter="/d"))) == 7
    unset = method_params("eagle3", drafter="/d")  # steps left to the engine: the var says
    assert token_count(Tier(None, unset, {"K": 2})) == 2
    assert token_count(Tier(None, unset)) is None
    assert token_count(Tier(None, method_params("ar"))) == 0


def test_vllm_schedule_from_method_configs_differing_only_in_the_token_count() -> None:
    ngram = {"prompt_lookup_max": 4}
    schedule = Schedule(
        (
            Tier(2, method_params("ngram", num_draft_tokens=5, **ngram)),
            Tier(8, method_params("ngram", num_draft_tokens=2, **ngram)),
            Tier(None, method_params("ar")),
        )
    )
    rendered = vllm_schedule(schedule)
    assert rendered.fields is not None, rendered.reason
    assert rendered.fields["num_speculative_tokens_per_batch_size"] == [
        [1, 2, 5],
        [3, 8, 2],
        [9, 1 << 16, 0],
    ]
    other = Schedule(
        (
            Tier(2, method_params("ngram", num_draft_tokens=5, prompt_lookup_max=4)),
            Tier(None, method_params("ngram", num_draft_tokens=2, prompt_lookup_max=3)),
        )
    )
    assert "differ in more than the token count" in (vllm_schedule(other).reason or "")


def test_sglang_adaptive_reads_eagle3s_num_steps_and_topk_knobs() -> None:
    """SGLang's num_steps from the method's knob (num_draft_tokens follows it at topk 1)."""
    knobs = {"topk": 1, "drafter": "/d"}
    schedule = Schedule(
        (
            Tier(3, method_params("eagle3", num_steps=5, **knobs)),
            Tier(None, method_params("eagle3", num_steps=2, **knobs)),
        )
    )
    rendered = sglang_adaptive(schedule)
    assert rendered.fields is not None, rendered.reason
    assert rendered.fields["speculative_adaptive_config"] == {
        "1": {"candidate_steps": [5]},
        "4": {"candidate_steps": [2]},
    }
    wide = method_params("eagle3", num_steps=3, topk=4, num_draft_tokens=8, drafter="/d")
    topk = Schedule((Tier(4, wide), Tier(None, method_params("ar"))))
    assert "topk 1" in (sglang_adaptive(topk).reason or "")
