"""A trace's replay gives exactly the engine's rounds, config by config (property test)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ddtune.ddtree.tree import DraftTree, accepted_nodes, build_tree
from ddtune.params import DecodeParams, SamplingParams
from ddtune.trace.files import view_name
from ddtune.trace.record import TraceRequest, TraceSettings, build_header, trace_request
from ddtune.trace.replay import Rules, replay_request


def traced(side, prompt_text, max_new, stop, ignore_eos, window, topk_max):
    """One request's trace, in memory (no folder)."""
    request = TraceRequest("prompt", prompt_text, max_new, stop, ignore_eos)
    header = build_header(side, [request], TraceSettings((window,), (), topk_max), "engine")
    return trace_request(side, request, header.requests[0], header), header


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    family=st.sampled_from(["qwen3", "llama"]),
    block=st.sampled_from([2, 4, 6]),
    prompt=st.text(alphabet=" etaoi", min_size=1, max_size=12),
    mode=st.sampled_from(["ddtree", "ddtree", "dflash", "ar"]),
    budget=st.integers(0, 40),
    topk=st.integers(1, 6),
    window=st.sampled_from([None, 1, 3, 1000]),
    max_new=st.integers(1, 40),  # up to the context (48): the capacity rule is exercised
    stop=st.sampled_from([(), ("e",), ("ta", "i ")]),
    ignore_eos=st.booleans(),
)
def test_replayed_rounds_equal_the_engines(
    sides, family, block, prompt, mode, budget, topk, window, max_new, stop, ignore_eos
):
    side = sides(family, block)
    data, header = traced(side, prompt, max_new, stop, ignore_eos, window, 6)
    params = DecodeParams(mode, budget, topk, window)
    rules = Rules(block, block, header.max_context)
    rounds = replay_request(data, view_name(window, block), params, rules)
    sampling = SamplingParams(max_new_tokens=max_new, stop_strings=stop, ignore_eos=ignore_eos)
    result = side.engine.generate(side.encode(prompt), params, sampling)
    assert list(rounds.lengths) == result.stats.acceptance_lengths
    stopped = 1 if result.stop_token is not None else 0
    assert rounds.completion_tokens == len(result.token_ids) + stopped


def test_the_property_test_is_not_vacuous(sides):
    """Drafts are accepted on these models, and trees of different configs differ in rounds."""
    side = sides("qwen3", 6)
    data, header = traced(side, "eat a toe", 40, (), True, None, 6)
    rules = Rules(6, 6, header.max_context)
    view = view_name(None, 6)
    wide = replay_request(data, view, DecodeParams("ddtree", 32, 6), rules)
    chain = replay_request(data, view, DecodeParams("dflash", 0, 1), rules)
    assert max(wide.lengths) >= 3
    assert sum(wide.lengths) / len(wide.lengths) > sum(chain.lengths) / len(chain.lengths)


def test_accepted_nodes_follows_the_matching_child_only():
    tree = build_tree([[-0.1, -2.0], [-0.2, -1.0]], [[5, 6], [7, 8]], 4, 2)
    # nodes: 5 (root child), 5-7, 6, 5-8 (pop order by score)
    assert accepted_nodes(tree, [5, 7, 9]) == 2
    assert accepted_nodes(tree, [6, 7]) == 1  # 6 has no child in a 4-node tree
    assert accepted_nodes(tree, [9]) == 0
    assert accepted_nodes(DraftTree.empty(), [5]) == 0


def test_a_full_context_ends_the_rounds_as_in_the_engine(sides):
    """prompt + max_tokens beyond the 48-token context: the capacity rule decides the end."""
    side = sides("llama", 4)
    prompt = "toe a tie " * 2
    data, header = traced(side, prompt, 40, (), True, None, 6)
    rules = Rules(4, 4, header.max_context)
    for params in (DecodeParams("ddtree", 20, 3), DecodeParams("dflash", 0, 1), DecodeParams("ar")):
        rounds = replay_request(data, view_name(None, 4), params, rules)
        result = side.engine.generate(
            side.encode(prompt), params, SamplingParams(max_new_tokens=40, ignore_eos=True)
        )
        assert result.finish_reason == "length" and len(result.token_ids) < 40
        assert list(rounds.lengths) == result.stats.acceptance_lengths


def test_a_trace_holds_the_query_lengths_asked_and_the_block_where_a_config_takes_it(sides):
    """`TraceSettings.block_too`: a sweep with DFlash configs at block sizes 2 and 3 beside one
    that drafts with the drafter's own block (4) records all three views."""
    side, request = sides("qwen3", 4), TraceRequest("prompt", "eat", 4, (), True)
    lengths = lambda settings: build_header(side, [request], settings, "e").query_lengths  # noqa: E731
    assert lengths(TraceSettings((None,), (3, 2), 4)) == (2, 3)
    assert lengths(TraceSettings((None,), (3, 2), 4, block_too=True)) == (2, 3, 4)
    assert lengths(TraceSettings((None,), (), 4)) == (4,)
