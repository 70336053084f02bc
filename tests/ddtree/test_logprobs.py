"""Logprobs, top-k, min_tokens and the stop token: the same values whatever the mode.

The property: for the same tokens, DDTree and DFlash report the logprobs AR reports
(the target's distribution at each committed position), at T=0 and for a seeded
sample path, and prompt logprobs do not depend on the mode either."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ddtune.ddtree.engine import Engine
from ddtune.ddtree.testing import logprobs_close
from ddtune.errors import UserError
from ddtune.params import DecodeParams, SamplingParams

PROMPT = [3, 4, 5, 2]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    family=st.sampled_from(["qwen3", "llama"]),
    block=st.sampled_from([2, 4, 6]),
    prompt=st.lists(st.integers(2, 7), min_size=1, max_size=10),
    mode=st.sampled_from(["ddtree", "ddtree", "dflash"]),
    budget=st.integers(0, 40),
    topk=st.integers(1, 8),
    n=st.integers(0, 8),
    temperature=st.sampled_from([0.0, 0.0, 1.0]),
    max_new=st.integers(1, 16),
)
def test_speculative_logprobs_equal_ar(
    engines, family, block, prompt, mode, budget, topk, n, temperature, max_new
):
    engine = engines(family, block)
    sampling = SamplingParams(
        max_new_tokens=max_new, temperature=temperature, seed=5, logprobs=n, prompt_logprobs=n
    )
    ref = engine.generate(prompt, DecodeParams("ar"), sampling)
    got = engine.generate(prompt, DecodeParams(mode, budget, topk), sampling)
    assert got.token_ids == ref.token_ids
    assert ref.logprobs is not None and got.logprobs is not None
    assert len(got.logprobs) == len(got.token_ids)
    assert logprobs_close(got.logprobs, ref.logprobs)
    assert ref.prompt_logprobs is not None and got.prompt_logprobs is not None
    assert len(got.prompt_logprobs) == len(prompt) - 1
    assert logprobs_close(got.prompt_logprobs, ref.prompt_logprobs)


def test_logprobs_are_the_targets_distribution(engines):
    engine = engines("qwen3", 4)
    sampling = SamplingParams(max_new_tokens=6, ignore_eos=True, logprobs=8, prompt_logprobs=8)
    res = engine.generate(PROMPT, DecodeParams("ddtree", 16, 4), sampling)
    ids = PROMPT + res.token_ids
    logits = engine.target(torch.tensor([ids])).logits[0]
    expected = torch.log_softmax(logits.double(), dim=-1)
    for i, entry in enumerate([*res.prompt_logprobs, *res.logprobs]):  # position i+1 of ids
        assert entry.token == ids[i + 1]
        assert entry.logprob == pytest.approx(expected[i, ids[i + 1]].item(), abs=1e-9)
        assert len(entry.top) == 8 and math.isclose(sum(math.exp(p) for _, p in entry.top), 1)
        assert [p for _, p in entry.top] == sorted((p for _, p in entry.top), reverse=True)
    for entry in res.logprobs:  # T=0: the chosen token is the most likely one
        assert entry.top[0][0] == entry.token


def test_no_logprobs_unless_asked_and_the_stop_token_is_reported(engines):
    engine = engines("qwen3", 4)
    plain = engine.generate(PROMPT, DecodeParams("ddtree"), SamplingParams(max_new_tokens=8))
    assert plain.logprobs is None and plain.prompt_logprobs is None
    assert "logprobs" not in plain.to_dict()
    token = plain.token_ids[2]
    stopped = engine.generate(
        PROMPT, DecodeParams("ddtree"), SamplingParams(max_new_tokens=8, stop_token_ids=(token,))
    )
    assert stopped.stop_token == token and stopped.finish_reason == "stop"
    assert stopped.token_ids == plain.token_ids[: plain.token_ids.index(token)]


@pytest.mark.parametrize("mode", ["ar", "ddtree"])
def test_min_tokens_keeps_stop_tokens_out(engines, mode):
    engine = engines("qwen3", 4)
    free = engine.generate(PROMPT, DecodeParams(mode), SamplingParams(max_new_tokens=12))
    first = free.token_ids[0]
    eos_engine = Engine(engine.target, engine.tokenizer, engine.drafter, eos_token_ids=[first])
    early = eos_engine.generate(PROMPT, DecodeParams(mode), SamplingParams(max_new_tokens=12))
    assert early.token_ids == [] and early.stop_token == first
    held = eos_engine.generate(
        PROMPT, DecodeParams(mode), SamplingParams(max_new_tokens=12, min_tokens=5)
    )
    assert len(held.token_ids) >= 5 and first not in held.token_ids[:5]
    with pytest.raises(UserError, match="min_tokens"):
        engine.generate(PROMPT, DecodeParams(mode), SamplingParams(max_new_tokens=2, min_tokens=3))


def test_top_k_one_samples_the_greedy_path(engines):
    engine = engines("qwen3", 4)
    greedy = engine.generate(
        PROMPT, DecodeParams("ddtree"), SamplingParams(max_new_tokens=10, ignore_eos=True)
    )
    for seed in range(3):
        sampled = engine.generate(
            PROMPT,
            DecodeParams("ddtree"),
            SamplingParams(max_new_tokens=10, ignore_eos=True, temperature=5.0, top_k=1, seed=seed),
        )
        assert sampled.token_ids == greedy.token_ids
