"""Inputs of the batched forwards: per-request trees padded into one verify, and the masks.

Verify (`verify_batch`): row r holds `[root_r] + tree_r.tokens`, padded to
the widest row T; its real tokens sit at positions pos_r + depth and see
the row's own past [0, pos_r) plus their ancestors (the tree's ancestor
matrix at [pos_r, pos_r + N_r + 1)); a padding token sees only key 0 (so
its softmax is defined) and its output is never read. Mask width S =
max(pos_r + N_r + 1), the end of the slotted cache view.

Draft (`draft_mask`): row r's block sees its context keys [lo_r, end_r)
(end_r = keys in its drafter slot after this call; lo_r = end_r - window,
or 0 with no window) and the whole block. See docs/ddtree.md "Engine".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ddtune.ddtree.tree import DraftTree, ancestor_matrix


@dataclass
class VerifyBatch:
    ids: torch.Tensor  # [B, T]
    positions: torch.Tensor  # [B, T]
    mask: torch.Tensor  # bool [B, T, S]


def verify_batch(
    roots: Sequence[int], positions: Sequence[int], trees: Sequence[DraftTree]
) -> VerifyBatch:
    """One padded verify input for rows with roots at `positions` and their draft trees."""
    rows = len(trees)
    counts = [t.size + 1 for t in trees]
    width = max(counts)
    span = max(p + n for p, n in zip(positions, counts, strict=True))
    ids = np.zeros((rows, width), dtype=np.int64)
    pos = np.repeat(np.asarray(positions, dtype=np.int64)[:, None], width, axis=1)
    mask = np.zeros((rows, width, span), dtype=bool)
    for r, (tree, past, n) in enumerate(zip(trees, positions, counts, strict=True)):
        ids[r, :n] = [roots[r], *tree.tokens]
        pos[r, 1:n] += np.asarray(tree.depths, dtype=np.int64)
        mask[r, :n, :past] = True
        mask[r, :n, past : past + n] = ancestor_matrix(tree.parents, max(tree.depths, default=0))
        mask[r, n:, 0] = True
    return VerifyBatch(torch.from_numpy(ids), torch.from_numpy(pos), torch.from_numpy(mask))


def draft_mask(
    starts: Sequence[int], counts: Sequence[int], windows: Sequence[int | None], block: int
) -> torch.Tensor:
    """bool [B, block, C + block]; C = max(start + count), the drafter cache view's end."""
    ends = [s + c for s, c in zip(starts, counts, strict=True)]
    span = max(ends)
    mask = np.zeros((len(ends), block, span + block), dtype=bool)
    for r, (end, window) in enumerate(zip(ends, windows, strict=True)):
        lo = 0 if window is None else max(0, end - window)
        mask[r, :, lo:end] = True
    mask[:, :, span:] = True
    return torch.from_numpy(mask)
