"""The three walks make the same choices; the likely-first walk computes fewer logits rows."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
import torch

from ddtune.ddtree.choice import TokenChooser
from ddtune.ddtree.sampling import Sampler
from ddtune.ddtree.tree import DraftTree, build_tree, chain_tree
from ddtune.ddtree.walk import (
    first_children,
    likely_path,
    walk_all_nodes,
    walk_levels,
    walk_likely_first,
)

VOCAB, HIDDEN = 5, 8  # a tiny vocabulary: the target often agrees with a drafted child


@dataclass
class Row:
    chooser: TokenChooser


class CountingHead:
    """A fixed random LM head that counts the rows it was asked for."""

    def __init__(self, seed: int) -> None:
        self.weight = torch.randn(VOCAB, HIDDEN, generator=torch.Generator().manual_seed(seed))
        self.rows = self.calls = 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.rows += x.shape[0]
        self.calls += 1
        return x @ self.weight.T


def random_tree(rng: random.Random, budget: int, topk: int, chain: bool) -> DraftTree:
    depth = rng.randint(1, 7)
    lps = [sorted((-rng.expovariate(1.0) for _ in range(topk)), reverse=True) for _ in range(depth)]
    ids = [rng.sample(range(VOCAB), topk) for _ in range(depth)]
    return chain_tree(ids, lps) if chain else build_tree(lps, ids, budget, topk)


def rows_for(temperature: float, batch: int) -> list[Row]:
    return [
        Row(TokenChooser(Sampler(temperature), torch.Generator().manual_seed(100 + r)))
        for r in range(batch)
    ]


@pytest.mark.parametrize("seed", range(60))
def test_the_walks_agree(seed: int) -> None:
    """Same paths and tokens from all three (T=0 and seeded T>0, batches of 1-3 rows)."""
    rng = random.Random(seed)
    batch = rng.randint(1, 3)
    trees = [
        random_tree(rng, rng.randint(1, 40), rng.randint(1, 4), chain=rng.random() < 0.2)
        for _ in range(batch)
    ]
    width = max(t.size for t in trees) + 1
    final = torch.randn(batch, width, HIDDEN, generator=torch.Generator().manual_seed(seed))
    temperature = 0.0 if seed % 2 else 0.9
    heads = [CountingHead(seed) for _ in range(3)]
    walks = [
        fn(head, rows_for(temperature, batch), trees, final)
        for fn, head in zip((walk_all_nodes, walk_levels, walk_likely_first), heads, strict=True)
    ]
    assert walks[0] == walks[1] == walks[2]
    all_nodes, _, likely = heads
    assert likely.rows <= all_nodes.rows  # never more logits rows than every node


def test_a_walk_on_the_likely_path_takes_one_matmul() -> None:
    """When the target agrees with the drafter's best token at every depth, one call."""
    depth = 6
    tokens = [[1, 2, 3]] * depth  # the best draft token is always 1
    lps = [[-0.1, -1.0, -2.0]] * depth
    tree = build_tree(lps, tokens, budget=16, topk=3)
    head = CountingHead(0)
    head.weight = torch.zeros(VOCAB, HIDDEN)
    head.weight[1, 0] = 1.0  # argmax is token 1 at every node
    final = torch.ones(1, tree.size + 1, HIDDEN)
    (path, emitted), *_ = walk_likely_first(head, rows_for(0.0, 1), [tree], final)
    assert emitted == [1] * (depth + 1)  # every depth accepted, then the bonus
    assert head.calls == 1 and head.rows == depth + 1  # the chain only, not the 16 nodes


def test_likely_path_follows_rank_zero_children() -> None:
    tree = build_tree([[-0.1, -0.2]] * 3, [[1, 2]] * 3, budget=6, topk=2)
    firsts = first_children(tree)
    path = likely_path(firsts, 0)
    assert [tree.ranks[n - 1] for n in path[1:]] == [0] * (len(path) - 1)
    assert [tree.depths[n - 1] for n in path[1:]] == list(range(1, len(path)))
