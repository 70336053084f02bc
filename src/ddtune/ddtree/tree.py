"""The draft tree: best-first construction from per-depth top-K log-probs, and its masks.

The drafter gives one distribution per depth d = 1..D (D = block_size - 1),
independent of the prefix. A node is a prefix (r_1, ..., r_d) of ranks into
those per-depth top-K lists; its score is the sum of the chosen log-probs.
Scores only fall when a prefix grows (log-probs <= 0) or a rank grows
(top-K is sorted), so a heap that pops the best prefix and pushes its next
sibling and its first child visits prefixes in exact score order: after B pops
it holds the B highest-scoring prefixes, parents before children.

Verify-sequence layout: index 0 is the root (the last committed token, not in
the cache yet), nodes are 1..N in pop order.

Torch is imported only by `verify_mask`, so a trace replays trees without it
(`ddtune.trace`: `build_tree`, `chain_tree` and `accepted_nodes` at T = 0).

See docs/ddtree.md "Engine".
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


@dataclass
class DraftTree:
    tokens: list[int]  # [N] token of node i+1
    parents: list[int]  # [N] verify index of the parent (0 = root)
    depths: list[int]  # [N] depth >= 1
    ranks: list[int]  # [N] rank of the token in its depth's top-K
    scores: list[float]  # [N] summed draft log-prob of the prefix

    @property
    def size(self) -> int:
        return len(self.tokens)

    @classmethod
    def empty(cls) -> DraftTree:
        return cls([], [], [], [], [])


def build_tree(
    top_logprobs: list[list[float]],  # [D][K] per-depth top-K log-probs, descending
    top_ids: list[list[int]],  # [D][K] their token ids
    budget: int,
    topk: int,
) -> DraftTree:
    """The `budget` best prefixes under the per-depth cap `topk` (fewer when fewer exist)."""
    depth_limit = len(top_logprobs)
    k = min(topk, min((len(row) for row in top_logprobs), default=0))
    tree = DraftTree.empty()
    if budget <= 0 or depth_limit == 0 or k == 0:
        return tree
    tokens, parents, depths, ranks, scores = (
        tree.tokens,
        tree.parents,
        tree.depths,
        tree.ranks,
        tree.scores,
    )
    # heap item: (-score, tie-break counter, depth, rank, parent verify index, parent score)
    heap = [(-top_logprobs[0][0], 0, 1, 0, 0, 0.0)]
    counter = 1
    for me in range(1, budget + 1):  # `me` = verify index of the node popped now
        if not heap:
            break
        neg, _, depth, rank, parent, parent_score = heapq.heappop(heap)
        tokens.append(top_ids[depth - 1][rank])
        parents.append(parent)
        depths.append(depth)
        ranks.append(rank)
        scores.append(-neg)
        if rank + 1 < k:  # next sibling: same parent, next rank
            score = parent_score + top_logprobs[depth - 1][rank + 1]
            heapq.heappush(heap, (-score, counter, depth, rank + 1, parent, parent_score))
            counter += 1
        if depth < depth_limit:  # first child
            score = top_logprobs[depth][0] - neg
            heapq.heappush(heap, (-score, counter, depth + 1, 0, me, -neg))
            counter += 1
    return tree


def chain_tree(top_ids: list[list[int]], top_logprobs: list[list[float]]) -> DraftTree:
    """DFlash: the top-1 token at every depth, one after another."""
    n = len(top_ids)
    scores = np.cumsum([row[0] for row in top_logprobs]).tolist() if n else []
    return DraftTree(
        tokens=[row[0] for row in top_ids],
        parents=list(range(n)),
        depths=list(range(1, n + 1)),
        ranks=[0] * n,
        scores=scores,
    )


def ancestor_matrix(parents: list[int], max_depth: int) -> np.ndarray:
    """bool [N+1, N+1]: row i is True at i's ancestors and at i itself (index 0 = root)."""
    n = len(parents) + 1
    up = np.zeros(n, dtype=np.int64)  # up[i] = parent of i; the root points to itself
    up[1:] = parents
    anc = np.eye(n, dtype=bool)
    rows = np.arange(n)
    cur = rows.copy()
    for _ in range(max_depth):  # climb one level per step, all nodes at once
        cur = up[cur]
        anc[rows, cur] = True
    return anc


def verify_mask(tree: DraftTree, past: int) -> torch.Tensor:
    """bool [1, N+1, past+N+1]: every tree row sees the whole past plus its own ancestors."""
    import torch

    n = tree.size + 1
    mask = np.ones((n, past + n), dtype=bool)
    mask[:, past:] = ancestor_matrix(tree.parents, max(tree.depths, default=0))
    return torch.from_numpy(mask)[None]


def children_index(tree: DraftTree) -> dict[tuple[int, int], int]:
    """(parent verify index, token) -> child verify index."""
    return {(p, t): i + 1 for i, (p, t) in enumerate(zip(tree.parents, tree.tokens, strict=True))}


def accepted_nodes(tree: DraftTree, choices: Sequence[int]) -> int:
    """Draft nodes the walk accepts when the target's choices along its path are `choices`.

    At T = 0 the target's choice at each node of the accepted path is the next
    token of its greedy path, whatever the tree: `choices[i]` is the token after
    i accepted nodes. The walk steps into the child holding it while one exists.
    """
    children = children_index(tree)
    node = accepted = 0
    for token in choices:
        child = children.get((node, int(token)))
        if child is None:
            break
        node, accepted = child, accepted + 1
    return accepted
