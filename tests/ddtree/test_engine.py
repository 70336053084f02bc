"""Engine edge cases: budgets, limits, stops inside accepted paths, EOS bonus, streaming, errors."""

from __future__ import annotations

import threading

import pytest

from ddtune.ddtree.engine import Engine, GenerationStats
from ddtune.errors import UserError
from ddtune.params import DecodeParams, SamplingParams

PROMPT = [3, 4, 5, 2]


def rounds_of(result) -> list[list[int]]:
    """Split token_ids into [prefill token] + one list per round (uncut runs only)."""
    out, i = [result.token_ids[:1]], 1
    for n in result.stats.acceptance_lengths:
        out.append(result.token_ids[i : i + n])
        i += n
    return out


AR = DecodeParams("ar")


def upto(n: int) -> SamplingParams:
    """Greedy, exactly `n` tokens (EOS ignored)."""
    return SamplingParams(max_new_tokens=n, ignore_eos=True)


def long_run(engine, on_tokens=None, **sampling):
    return engine.generate(
        PROMPT, DecodeParams("ddtree", 40, 6), upto(40).replace(**sampling), on_tokens
    )


def test_budget_zero_is_plain_decoding(engines):
    engine = engines("qwen3", 4)
    ref = engine.generate(PROMPT, AR, upto(12))
    res = engine.generate(PROMPT, DecodeParams("ddtree", budget=0), upto(12))
    assert res.token_ids == ref.token_ids
    assert set(res.stats.tree_sizes) == {0} and set(res.stats.acceptance_lengths) == {1}


def test_budget_below_depth_and_above_possible(engines):
    engine = engines("qwen3", 6)
    ref = engine.generate(PROMPT, AR, upto(30))
    small = engine.generate(PROMPT, DecodeParams("ddtree", 2, 3), upto(30))
    assert small.token_ids == ref.token_ids and max(small.stats.tree_sizes) == 2
    engine3 = engines("llama", 3)  # depth 2, topk 2: at most 2 + 4 = 6 nodes
    res = engine3.generate(PROMPT, DecodeParams("ddtree", 50, 2), upto(30))
    assert res.stats.tree_sizes[:-2] == [6] * (len(res.stats.tree_sizes) - 2)
    assert max(res.stats.tree_sizes) == 6


def test_topk_one_is_the_dflash_chain(engines):
    engine = engines("qwen3", 6)
    chain = engine.generate(PROMPT, DecodeParams("dflash"), upto(25))
    tree = engine.generate(PROMPT, DecodeParams("ddtree", 5, 1), upto(25))
    assert tree.token_ids == chain.token_ids
    assert tree.stats.acceptance_lengths == chain.stats.acceptance_lengths


@pytest.mark.parametrize("mode", ["ar", "dflash", "ddtree"])
def test_max_new_tokens_reached_mid_round(engines, mode):
    engine = engines("qwen3", 6)
    for limit in (1, 2, 5, 9):
        res = engine.generate(PROMPT, DecodeParams(mode, 40, 6), upto(limit))
        assert len(res.token_ids) == limit and res.finish_reason == "length"


def _inside_accepted_path(result) -> tuple[int, int]:
    """(index, token): first occurrence of a token that a round accepted before its bonus."""
    seen: set[int] = set()
    index = 0
    for chunk in rounds_of(result):
        for j, token in enumerate(chunk):
            if token not in seen and j < len(chunk) - 1 and index > 0:
                return index, token
            seen.add(token)
            index += 1
    raise AssertionError("no accepted draft token in this run")


def test_stop_token_inside_accepted_path_cuts_exactly(engines):
    engine = engines("qwen3", 6)
    full = long_run(engine)
    index, token = _inside_accepted_path(full)
    res = long_run(engine, stop_token_ids=(token,))
    assert res.token_ids == full.token_ids[:index]
    assert res.finish_reason == "stop"


def test_stop_string_inside_accepted_path_cuts_exactly(engines):
    engine = engines("qwen3", 6)
    full = long_run(engine)
    index, _ = _inside_accepted_path(full)
    text = engine.tokenizer.decode(full.token_ids)
    stop = engine.tokenizer.decode(full.token_ids[index : index + 2])
    cut = text.find(stop)
    res = long_run(engine, stop_strings=(stop,))
    assert res.text == text[:cut] and res.finish_reason == "stop"
    assert engine.tokenizer.decode(res.token_ids) == text[:cut]


def test_eos_as_bonus_token_stops(engines):
    engine = engines("llama", 6)
    full = long_run(engine)
    index = 1  # tokens before the current round (the prefill gave one)
    for chunk in rounds_of(full)[1:]:
        index += len(chunk)
        bonus = chunk[-1]
        if len(chunk) >= 2 and bonus not in full.token_ids[: index - 1]:
            break
    else:
        raise AssertionError("no round with accepted drafts and a fresh bonus token")
    eos_engine = Engine(engine.target, engine.tokenizer, engine.drafter, eos_token_ids=[bonus])
    res = eos_engine.generate(PROMPT, DecodeParams("ddtree", 40, 6), SamplingParams(40))
    assert res.token_ids == full.token_ids[: index - 1]
    assert res.finish_reason == "stop"


def test_streaming_and_cancellation(engines):
    engine = engines("qwen3", 4)
    streamed: list[int] = []
    res = long_run(engine, on_tokens=streamed.extend, stop_strings=("zz",))
    assert streamed == res.token_ids
    calls: list[list[int]] = []
    res = long_run(engine, on_tokens=lambda ids: calls.append(ids) or len(calls) < 2)
    assert res.finish_reason == "cancelled"
    assert res.token_ids[: sum(map(len, calls))] == [t for c in calls for t in c]
    assert len(calls) == 2


def test_concurrent_calls_are_serialised_and_independent(engines):
    engine = engines("llama", 4)
    requests = [
        (AR, upto(20)),
        (DecodeParams("ddtree", 9, 3, 2), upto(20)),
        (DecodeParams("dflash"), upto(20).replace(temperature=0.8, seed=3)),
    ]
    alone = [engine.generate(PROMPT, *request).token_ids for request in requests]
    results: dict[int, list[int]] = {}

    def work(i: int) -> None:
        results[i] = engine.generate(PROMPT, *requests[i % 3]).token_ids

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[i] == alone[i % 3] for i in range(6))


def test_input_errors(engines):
    engine = engines("qwen3", 4)
    ddtree, sampling = DecodeParams(), SamplingParams()
    with pytest.raises(UserError, match="context holds"):
        engine.generate([2] * engine.max_context, AR, sampling)
    with pytest.raises(UserError, match="empty"):
        engine.generate([], AR, sampling)
    with pytest.raises(UserError, match="token ids"):
        engine.generate([999], ddtree, sampling)
    no_drafter = Engine(engine.target, engine.tokenizer)
    with pytest.raises(UserError, match="needs a drafter"):
        no_drafter.generate(PROMPT, ddtree, sampling)
    assert (
        no_drafter.generate(PROMPT, AR, upto(3)).token_ids
        == engine.generate(PROMPT, AR, upto(3)).token_ids
    )
    with pytest.raises(TypeError, match="DecodeParams"):
        engine.generate(PROMPT, "ar", sampling)  # type: ignore[arg-type]


def test_context_limit_ends_with_length(engines):
    engine = engines("qwen3", 4)
    small = Engine(engine.target, engine.tokenizer, engine.drafter, max_context=12)
    res = small.generate(PROMPT, DecodeParams("ddtree", budget=30), upto(50))
    assert res.finish_reason == "length" and len(res.token_ids) == 12 - len(PROMPT) + 1
    ref = small.generate(PROMPT, AR, upto(50))
    assert res.token_ids == ref.token_ids


def test_stats_round_trip(engines):
    res = long_run(engines("qwen3", 4))
    d = res.to_dict()
    assert set(d["stats"]["stage_seconds"]) == {"draft", "tree", "verify", "commit"}
    assert d["stats"]["mean_acceptance_length"] == pytest.approx(
        sum(res.stats.acceptance_lengths) / res.stats.rounds
    )
    assert GenerationStats.from_dict(d["stats"]) == res.stats
