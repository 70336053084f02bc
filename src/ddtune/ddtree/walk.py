"""The batched walk: follow each row's target choices down its verified tree.

Per row, from the root: the target's own choice at the current node (the
row's `TokenChooser`: argmax at T=0, else its sampler with its own generator,
one draw per emitted token; min_tokens ban; logprobs); a matching child is
accepted and the walk goes on from it, the first choice without one is the
bonus token. Three ways to get the logits, same choices (tests/ddtree/test_walk.py):

- `walk_likely_first` (the default for small trees): ONE LM-head matmul over
  each row's likely path (the root, its rank-0 child, that child's rank-0
  child, ...: the drafter's best guess), then one more over the rows whose
  walk took another child, from that child on. ~8 rows at b16 instead of
  17, at b32 instead of 33: the head is the biggest single matmul of a
  round (4096 x 256 on the bundled models).
- `walk_all_nodes`: ONE LM-head matmul over every verified node of every row
  and one host sync for the argmaxes; the walk itself is then pure Python.
- `walk_levels`: one LM-head matmul per depth over the rows still walking
  (logits only for visited nodes). Cheapest for big trees.

`walk` picks by the node count: one matmul at a time (likely first, or all
nodes with `LIKELY_FIRST` off) while there are at most
`NODES_PER_ROW * (rows + 1)` nodes, else per depth. Measured on the bundled
models (one thread): a level costs about as much as 30 rows of the one
matmul plus 30 per walking row, and walks are ~7 levels deep there. See
docs/ddtree.md "Engine" and docs/performance.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import torch

from ddtune.ddtree.choice import TokenChooser
from ddtune.ddtree.tree import DraftTree, children_index

NODES_PER_ROW = 30  # one matmul at a time (not per depth) while nodes <= NODES_PER_ROW * (rows + 1)
LIKELY_FIRST = True  # ...the likely paths first (False: every node at once)

Walk = tuple[list[int], list[int]]  # accepted verify indices (root first), emitted tokens
Head = Callable[[torch.Tensor], torch.Tensor]  # final-norm states [..., H] -> logits [..., V]


class Chooser(Protocol):
    chooser: TokenChooser


def walk(
    head: Head, rows: Sequence[Chooser], trees: Sequence[DraftTree], final: torch.Tensor
) -> list[Walk]:
    """Per row: accepted path and emitted tokens. `final` [B, T, H] (row r's nodes first)."""
    if sum(t.size + 1 for t in trees) > NODES_PER_ROW * (len(trees) + 1):
        return walk_levels(head, rows, trees, final)
    if LIKELY_FIRST:
        return walk_likely_first(head, rows, trees, final)
    return walk_all_nodes(head, rows, trees, final)


def walk_likely_first(
    head: Head, rows: Sequence[Chooser], trees: Sequence[DraftTree], final: torch.Tensor
) -> list[Walk]:
    """Logits for each row's likely path first; more only where a walk leaves it.

    The likely path from a node: the node, its first child (rank 0, the
    drafter's best token at that depth), that child's first child, and so on.
    One LM-head matmul covers every row's likely path from the root; the
    rows whose walk takes another child go on from it, their likely paths
    from there in one more matmul, and so on.
    """
    firsts = [first_children(t) for t in trees]
    return walk_in_matmuls(head, rows, trees, final, lambda r, node: likely_path(firsts[r], node))


def walk_all_nodes(
    head: Head, rows: Sequence[Chooser], trees: Sequence[DraftTree], final: torch.Tensor
) -> list[Walk]:
    """Logits for every verified node of every row in one matmul (one host sync)."""
    return walk_in_matmuls(head, rows, trees, final, lambda r, _: list(range(trees[r].size + 1)))


def walk_in_matmuls(
    head: Head,
    rows: Sequence[Chooser],
    trees: Sequence[DraftTree],
    final: torch.Tensor,
    nodes_from: Callable[[int, int], list[int]],  # (row, node) -> nodes to compute from there
) -> list[Walk]:
    """Walk every row; each LM-head matmul covers `nodes_from(row, node)` of the rows
    whose walk reached a node without logits, until every walk has its bonus token."""
    children = [children_index(t) for t in trees]
    walks: list[Walk] = [([0], []) for _ in rows]
    starts = dict.fromkeys(range(len(rows)), 0)  # row -> the node its walk goes on from
    while starts:
        where = [(r, n) for r, start in starts.items() for n in nodes_from(r, start)]
        logits = head(final[[r for r, _ in where], [n for _, n in where]])  # [N, V]
        greedy = logits.argmax(dim=-1).tolist()
        at = {key: i for i, key in enumerate(where)}
        left: dict[int, int] = {}
        for r, node in starts.items():
            path, tokens = walks[r]
            while (r, node) in at:
                i = at[(r, node)]
                choice = _choose(rows[r].chooser, greedy[i], logits[i])
                tokens.append(choice)
                child = children[r].get((node, choice))
                if child is None:
                    break  # the bonus token: this row's walk is done
                path.append(child)
                node = child
            else:
                left[r] = node  # a child without logits yet
        starts = left
    return walks


def first_children(tree: DraftTree) -> dict[int, int]:
    """Verify index -> its rank-0 child's (the drafter's best token one level down)."""
    return {
        p: i + 1
        for i, (p, rank) in enumerate(zip(tree.parents, tree.ranks, strict=True))
        if rank == 0
    }


def likely_path(firsts: dict[int, int], node: int) -> list[int]:
    """`node`, then first child after first child down the tree."""
    path = [node]
    while (node := firsts.get(node, -1)) >= 0:
        path.append(node)
    return path


def walk_levels(
    head: Head, rows: Sequence[Chooser], trees: Sequence[DraftTree], final: torch.Tensor
) -> list[Walk]:
    """Logits one depth at a time: each matmul covers the current node of every walking row."""
    return walk_in_matmuls(head, rows, trees, final, lambda r, node: [node])


def _choose(chooser: TokenChooser, argmax: int, logits: torch.Tensor) -> int:
    """The batch's argmax when that is the choice, else the chooser on the row's logits."""
    return chooser.took(argmax) if chooser.plain_argmax else chooser.choose(logits)
