"""T>0: the speculative output distribution equals AR sampling (chi-square, fixed seeds)."""

from __future__ import annotations

import collections

import pytest
import torch
from scipy.stats import chisquare

from ddtune.ddtree.sampling import Sampler
from ddtune.params import DecodeParams, SamplingParams

PROMPT = [2, 5, 3]


def exact_second_token_distribution(engine, sampler: Sampler) -> torch.Tensor:
    """P(second generated token) under AR sampling, by enumerating the first token."""
    model = engine.target
    with torch.no_grad():
        p1 = sampler.probs(model(torch.tensor([PROMPT])).logits[0, -1])
        vocab = p1.numel()
        batch = torch.tensor([PROMPT + [a] for a in range(vocab)])
        p2 = sampler.probs(model(batch).logits[:, -1])  # [V, V]: row a = P(. | first = a)
    return p1 @ p2


@pytest.mark.parametrize("mode, temperature, top_p", [("ddtree", 1.0, 1.0), ("dflash", 0.7, 0.8)])
def test_second_token_distribution_matches_ar(engines, mode, temperature, top_p):
    engine = engines("qwen3", 4)
    expected = exact_second_token_distribution(engine, Sampler(temperature, top_p))
    n = 600
    counts = collections.Counter(
        engine.generate(
            PROMPT,
            DecodeParams(mode, 12, 3),
            SamplingParams(2, temperature, top_p, seed, ignore_eos=True),
        ).token_ids[1]
        for seed in range(n)
    )
    keep = [t for t in range(expected.numel()) if expected[t] * n >= 5]
    observed = [counts[t] for t in keep] + [n - sum(counts[t] for t in keep)]
    exp = [float(expected[t]) * n for t in keep] + [n - sum(float(expected[t]) * n for t in keep)]
    if exp[-1] < 1e-9:
        observed, exp = observed[:-1], exp[:-1]
    assert len(keep) >= 3  # a real distribution, not a point mass
    assert chisquare(observed, exp).pvalue > 1e-3


def test_same_seed_gives_same_sample_path_in_every_mode(engines):
    engine = engines("llama", 6)
    for seed in range(8):
        sampling = SamplingParams(15, 0.9, 0.95, seed, ignore_eos=True)
        ar = engine.generate([4, 2, 6], DecodeParams("ar"), sampling).token_ids
        assert engine.generate([4, 2, 6], DecodeParams("dflash"), sampling).token_ids == ar
        tree = engine.generate([4, 2, 6], DecodeParams("ddtree", 20, 4), sampling)
        assert tree.token_ids == ar


def test_top_p_keeps_the_smallest_head():
    probs = Sampler(1.0, 0.6).probs(torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05])))
    assert probs.tolist() == pytest.approx([0.625, 0.375, 0.0, 0.0])
    assert Sampler(1.0, 0.01).probs(torch.tensor([0.0, 1.0])).tolist() == [0.0, 1.0]
