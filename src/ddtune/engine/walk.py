"""The batched walk: follow each row's target choices down its verified tree.

Per row, from the root: the target's own choice at the current node (the
row's `TokenChooser`: argmax at T=0, else its sampler with its own generator,
one draw per emitted token; min_tokens ban; logprobs); a matching child is accepted and the walk goes on from it, the
first choice without one is the bonus token. Two ways to get the logits,
same choices:

- `walk_all_nodes`: ONE LM-head matmul over every verified node of every row
  and one host sync for the argmaxes; the walk itself is then pure Python.
  Cheapest while the batch has few nodes (the head's weights are read once).
- `walk_levels`: one LM-head matmul per depth over the rows still walking
  (logits only for visited nodes). Cheapest for big trees.

`walk` picks by the node count: all nodes at once while there are at most
`NODES_PER_ROW * (rows + 1)` of them. Measured on the bundled models (one
thread): a level costs about as much as 30 rows of the one matmul plus 30
per walking row, and walks are ~7 levels deep there. See
docs/architecture.md "Engine".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import torch

from ddtune.engine.choice import TokenChooser
from ddtune.engine.tree import DraftTree, children_index

NODES_PER_ROW = 30  # all nodes in one matmul while nodes <= NODES_PER_ROW * (rows + 1)

Walk = tuple[list[int], list[int]]  # accepted verify indices (root first), emitted tokens
Head = Callable[[torch.Tensor], torch.Tensor]  # final-norm states [..., H] -> logits [..., V]


class Chooser(Protocol):
    chooser: TokenChooser


def walk(
    head: Head, rows: Sequence[Chooser], trees: Sequence[DraftTree], final: torch.Tensor
) -> list[Walk]:
    """Per row: accepted path and emitted tokens. `final` [B, T, H] (row r's nodes first)."""
    if sum(t.size + 1 for t in trees) <= NODES_PER_ROW * (len(trees) + 1):
        return walk_all_nodes(head, rows, trees, final)
    return walk_levels(head, rows, trees, final)


def walk_all_nodes(
    head: Head, rows: Sequence[Chooser], trees: Sequence[DraftTree], final: torch.Tensor
) -> list[Walk]:
    index_rows = [r for r, t in enumerate(trees) for _ in range(t.size + 1)]
    index_nodes = [i for t in trees for i in range(t.size + 1)]
    logits = head(final[index_rows, index_nodes])  # [N, V]
    greedy = logits.argmax(dim=-1).tolist()
    walks, offset = [], 0
    for row, tree in zip(rows, trees, strict=True):
        children, node = children_index(tree), 0
        path, tokens = [0], []
        while True:
            at = offset + node
            choice = _choose(row.chooser, greedy[at], logits[at])
            tokens.append(choice)
            child = children.get((node, choice))
            if child is None:
                break
            path.append(child)
            node = child
        walks.append((path, tokens))
        offset += tree.size + 1
    return walks


def walk_levels(
    head: Head, rows: Sequence[Chooser], trees: Sequence[DraftTree], final: torch.Tensor
) -> list[Walk]:
    children = [children_index(t) for t in trees]
    nodes = [0] * len(rows)
    walks: list[Walk] = [([0], []) for _ in rows]
    active = list(range(len(rows)))
    while active:
        logits = head(final[active, [nodes[r] for r in active]])  # [A, V]
        greedy = logits.argmax(dim=-1).tolist()
        still = []
        for i, r in enumerate(active):
            choice = _choose(rows[r].chooser, greedy[i], logits[i])
            path, tokens = walks[r]
            tokens.append(choice)
            child = children[r].get((nodes[r], choice))
            if child is not None:
                path.append(child)
                nodes[r] = child
                still.append(r)
        active = still
    return walks


def _choose(chooser: TokenChooser, argmax: int, logits: torch.Tensor) -> int:
    """The batch's argmax when that is the choice, else the chooser on the row's logits."""
    return chooser.took(argmax) if chooser.plain_argmax else chooser.choose(logits)
