"""The slotted KV cache of batched decoding: one preallocated slot per running request.

Layout per tensor: [num_layers, slots + 1, kv_heads, capacity, head_dim],
written in place; `reserve` grows the capacity (doubling) when a request
needs more, so memory follows the longest request, not the model's context. Slot s holds one request's keys at [0, lengths[s]); the
extra last slot is scratch, where the padding tokens of a batched forward
write (nobody reads them). Batch row r is slot `first + r`, so the keys of
a batch are a view of the cache, never a copy: the scheduler keeps the
requests of a round in consecutive slots (`swap`, `move`).

A forward pass sees the cache through a `SlotView` (a `cache.KVStore`): row
r writes its `counts[r]` real tokens at [starts[r], starts[r] + counts[r])
of its slot, the rest of its `width` tokens go to scratch, and attention
reads slots [first, first + rows) up to the largest end; the caller's mask
hides what a row must not see (other requests' lengths, padding, the
drafter's window, which `write` therefore ignores). `advance` sets each
slot's length to its end. After a tree verify `compact` keeps one slot's
accepted path in place. See docs/ddtree.md "Engine".
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ddtune.ddtree.models.config import ModelConfig


class SlotCache:
    def __init__(
        self,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        slots: int,
        capacity: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        shape = (num_layers, slots + 1, num_kv_heads, capacity, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.capacity = capacity
        self.lengths = [0] * (slots + 1)  # the scratch slot's too (swap goes through it)
        self.scratch = slots

    @classmethod
    def for_model(
        cls, cfg: ModelConfig, slots: int, capacity: int, like: torch.Tensor
    ) -> SlotCache:
        """Slots for the layers of `cfg`, with the dtype and device of the tensor `like`."""
        return cls(
            cfg.num_hidden_layers,
            cfg.num_key_value_heads,
            cfg.head_dim,
            slots,
            capacity,
            like.dtype,
            like.device,
        )

    def reserve(self, capacity: int) -> None:
        """Grow every slot to hold at least `capacity` positions (reallocates, keeps contents)."""
        if capacity <= self.capacity:
            return
        size = max(capacity, 2 * self.capacity)
        for name in ("k", "v"):
            old = getattr(self, name)
            new = old.new_zeros((*old.shape[:3], size, old.shape[4]))
            new[:, :, :, : self.capacity] = old
            setattr(self, name, new)
        self.capacity = size

    def view(
        self, first: int, starts: Sequence[int], counts: Sequence[int], width: int
    ) -> SlotView:
        """The cache for one forward over slots first.. with `width` tokens per row."""
        return SlotView(self, first, list(starts), list(counts), width)

    def compact(self, slot: int, keep: torch.Tensor, start: int) -> None:
        """Keep [0, start) plus the ascending absolute positions `keep` (all >= start)."""
        n = int(keep.numel())
        if n:
            keep = keep.to(self.k.device)
            self.k[:, slot, :, start : start + n] = self.k[:, slot, :, keep]
            self.v[:, slot, :, start : start + n] = self.v[:, slot, :, keep]
        self.lengths[slot] = start + n

    def move(self, src: int, dst: int) -> None:
        """Copy slot `src` over slot `dst` (src keeps its data)."""
        n = self.lengths[src]
        self.k[:, dst, :, :n] = self.k[:, src, :, :n]
        self.v[:, dst, :, :n] = self.v[:, src, :, :n]
        self.lengths[dst] = n

    def swap(self, a: int, b: int) -> None:
        if a == b:
            return
        self.move(a, self.scratch)
        self.move(b, a)
        self.move(self.scratch, b)

    def clear(self, slot: int) -> None:
        self.lengths[slot] = 0


class SlotView:
    """`KVStore` of one batched forward: rows are slots first .. first + len(starts) - 1."""

    def __init__(
        self, cache: SlotCache, first: int, starts: list[int], counts: list[int], width: int
    ) -> None:
        if any(s + c > cache.capacity for s, c in zip(starts, counts, strict=True)):
            raise ValueError("a row's tokens do not fit its slot")
        self.cache, self.first, self.rows = cache, first, len(starts)
        self.starts, self.counts, self.width = starts, counts, width
        self.end = max(s + c for s, c in zip(starts, counts, strict=True))
        self._slice = self.rows == 1 and counts[0] == width  # a plain slice write
        if not self._slice:
            self._index = _write_index(cache, first, starts, counts, width)

    @property
    def length(self) -> int:
        return max(self.starts)

    def write(
        self, layer: int, k: torch.Tensor, v: torch.Tensor, window: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v [rows, kv_heads, width, head_dim]; keys of the rows' slots up to `end`.

        `window` is ignored: the caller's mask applies each row's window.
        """
        ck, cv = self.cache.k[layer], self.cache.v[layer]
        if self._slice:
            start = self.starts[0]
            ck[self.first, :, start : start + self.width] = k[0]
            cv[self.first, :, start : start + self.width] = v[0]
        else:
            ck[self._index] = k
            cv[self._index] = v
        rows = slice(self.first, self.first + self.rows)
        return ck[rows, :, : self.end], cv[rows, :, : self.end]

    def advance(self, count: int) -> None:
        """Each row's slot now ends after its real tokens (`count`, the width, is implied)."""
        for r, (start, n) in enumerate(zip(self.starts, self.counts, strict=True)):
            self.cache.lengths[self.first + r] = start + n


def _write_index(
    cache: SlotCache, first: int, starts: list[int], counts: list[int], width: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Advanced index (slot [R,1,W], head [1,H,1], position [R,1,W]) of every written key."""
    t = torch.arange(width)
    start = torch.tensor(starts)[:, None]
    real = t[None, :] < torch.tensor(counts)[:, None]  # [R, W]
    slots = torch.where(real, torch.arange(first, first + len(starts))[:, None], cache.scratch)
    positions = torch.where(real, start + t, t.expand(len(starts), width))
    heads = torch.arange(cache.k.shape[2])[None, :, None]
    device = cache.k.device
    return slots[:, None].to(device), heads.to(device), positions[:, None].to(device)
