"""Exactness of tree verification and of whole generations at T=0 (property tests)."""

from __future__ import annotations

import random

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ddtune.ddtree.models.loading import load_decoder
from ddtune.ddtree.testing import write_random_checkpoint
from ddtune.ddtree.tree import build_tree, verify_mask
from ddtune.params import DecodeParams, SamplingParams


def test_each_node_logits_equal_its_ancestor_path_alone(tmp_path):
    target_dir, _ = write_random_checkpoint(tmp_path, seed=9, family="qwen3")
    model = load_decoder(target_dir)  # float32
    rng = random.Random(0)
    prompt = [rng.randrange(2, 100) for _ in range(11)]
    lps = [sorted((-rng.expovariate(1) for _ in range(3)), reverse=True) for _ in range(4)]
    ids = [rng.sample(range(2, 100), 3) for _ in range(4)]
    tree = build_tree(lps, ids, 30, 3)
    root = 42
    with torch.no_grad():
        cache = model.new_cache(64)
        model(torch.tensor([prompt]), cache=cache)
        positions = len(prompt) + torch.tensor([[0, *tree.depths]])
        verify = model(
            torch.tensor([[root, *tree.tokens]]),
            positions=positions,
            cache=cache,
            attn_mask=verify_mask(tree, len(prompt)),
        ).logits[0]
        for node in range(tree.size + 1):
            path, i = [], node
            while i:
                path.append(tree.tokens[i - 1])
                i = tree.parents[i - 1]
            alone = model(torch.tensor([prompt + [root] + path[::-1]])).logits[0, -1]
            assert (verify[node] - alone).abs().max().item() < 1e-4


@settings(max_examples=70, deadline=None, derandomize=True)
@given(
    family=st.sampled_from(["qwen3", "llama"]),
    block=st.sampled_from([2, 4, 6]),
    prompt=st.lists(st.integers(2, 7), min_size=1, max_size=10),
    mode=st.sampled_from(["ddtree", "ddtree", "dflash"]),
    budget=st.integers(0, 64),
    topk=st.integers(1, 8),
    window=st.sampled_from([None, 1, 3, 1000]),
    max_new=st.integers(1, 20),
)
def test_t0_speculative_output_equals_ar(
    engines, family, block, prompt, mode, budget, topk, window, max_new
):
    engine = engines(family, block)
    sampling = SamplingParams(max_new_tokens=max_new)
    ref = engine.generate(prompt, DecodeParams("ar"), sampling)
    got = engine.generate(prompt, DecodeParams(mode, budget, topk, window), sampling)
    assert got.token_ids == ref.token_ids
    assert got.finish_reason == ref.finish_reason
    assert all(1 <= a <= block for a in got.stats.acceptance_lengths)
    assert len(got.token_ids) <= 1 + sum(got.stats.acceptance_lengths)


def test_speculation_accepts_tokens_on_these_models(engines):
    """The property test is not vacuous: drafts do get accepted on the test models."""
    engine = engines("qwen3", 6)
    res = engine.generate(
        [3, 4, 5], DecodeParams("ddtree", 32, 8), SamplingParams(max_new_tokens=40, ignore_eos=True)
    )
    assert res.stats.mean_acceptance_length > 1.5
    assert max(res.stats.acceptance_lengths) >= 3
