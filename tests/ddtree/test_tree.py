"""Tree builder against brute force; masks are exactly the ancestors."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from ddtune.ddtree.tree import ancestor_matrix, build_tree, chain_tree, verify_mask


def random_draft(rng: random.Random, depth: int, k: int, vocab: int = 50):
    """Per-depth sorted log-probs and distinct token ids."""
    lps = [sorted((-rng.expovariate(1.0) for _ in range(k)), reverse=True) for _ in range(depth)]
    ids = [rng.sample(range(vocab), k) for _ in range(depth)]
    return lps, ids


def rank_paths(tree) -> list[tuple[int, ...]]:
    paths: list[tuple[int, ...]] = []
    for parent, rank in zip(tree.parents, tree.ranks, strict=True):
        paths.append((paths[parent - 1] if parent else ()) + (rank,))
    return paths


def brute_force_best(lps, topk: int, budget: int) -> set[tuple[int, ...]]:
    prefixes = []
    for d in range(1, len(lps) + 1):
        for ranks in itertools.product(range(topk), repeat=d):
            prefixes.append((sum(lps[i][r] for i, r in enumerate(ranks)), ranks))
    prefixes.sort(reverse=True)
    return {ranks for _, ranks in prefixes[:budget]}


@pytest.mark.parametrize("seed", range(40))
def test_tree_is_the_budget_best_prefixes(seed):
    rng = random.Random(seed)
    depth, k = rng.randint(1, 4), rng.randint(1, 4)
    topk, budget = rng.randint(1, k), rng.randint(0, 45)
    lps, ids = random_draft(rng, depth, k)
    tree = build_tree(lps, ids, budget, topk)
    possible = sum(topk**d for d in range(1, depth + 1))
    assert tree.size == min(budget, possible)
    assert all(1 <= d <= depth for d in tree.depths)
    assert all(r < topk for r in tree.ranks)
    assert all(p < i + 1 for i, p in enumerate(tree.parents))  # parents precede children
    paths = rank_paths(tree)
    assert set(paths) == brute_force_best(lps, topk, budget)
    for i, path in enumerate(paths):
        assert tree.tokens[i] == ids[len(path) - 1][path[-1]]
        assert tree.scores[i] == pytest.approx(sum(lps[d][r] for d, r in enumerate(path)))
        assert tree.depths[i] == len(path)


@pytest.mark.parametrize("seed", range(10))
def test_mask_is_exactly_the_ancestors(seed):
    rng = random.Random(100 + seed)
    lps, ids = random_draft(rng, 4, 3)
    tree = build_tree(lps, ids, rng.randint(1, 40), 3)
    anc = ancestor_matrix(tree.parents, max(tree.depths))
    for i in range(tree.size + 1):
        expected = {i}
        node = i
        while node:
            node = tree.parents[node - 1]
            expected.add(node)
        assert set(np.flatnonzero(anc[i])) == expected
    mask = verify_mask(tree, past=5)[0].numpy()
    assert mask.shape == (tree.size + 1, 5 + tree.size + 1)
    assert mask[:, :5].all()
    assert (mask[:, 5:] == anc).all()


def test_topk_one_is_the_chain():
    lps, ids = random_draft(random.Random(7), 5, 4)
    tree = build_tree(lps, ids, 100, 1)
    chain = chain_tree(ids, lps)
    assert (tree.tokens, tree.parents, tree.depths) == (chain.tokens, chain.parents, chain.depths)


def test_budget_zero_and_no_depth_give_empty_trees():
    lps, ids = random_draft(random.Random(8), 3, 2)
    assert build_tree(lps, ids, 0, 2).size == 0
    assert build_tree([], [], 10, 2).size == 0
    assert verify_mask(build_tree([], [], 10, 2), past=3).shape == (1, 1, 4)
