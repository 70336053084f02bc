"""A preallocated key/value cache for one sequence batch, written in place.

Layout per tensor: [num_layers, B, kv_heads, capacity, head_dim]. Slots
[0, length) are valid. A forward pass with the cache writes its T new keys at
[length, length + T) in every layer (`write`), then the caller advances the
length once (`advance`). After a tree verify, `compact` keeps the accepted
slots and moves them down in place; `truncate` drops the tail.
"""

from __future__ import annotations

import torch

from ddtune.errors import UserError


class KVCache:
    def __init__(
        self,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        capacity: int,
        batch: int = 1,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        shape = (num_layers, batch, num_kv_heads, capacity, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.capacity = capacity
        self.length = 0

    def write(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v [B, kv_heads, T, head_dim] after the valid slots; return all keys so far."""
        end = self.length + k.shape[2]
        if end > self.capacity:
            raise UserError(
                f"the sequence needs {end} cache slots but the context holds {self.capacity}"
            )
        self.k[layer, :, :, self.length : end] = k
        self.v[layer, :, :, self.length : end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]

    def advance(self, count: int) -> None:
        """Mark `count` slots written by the last forward as valid."""
        self.length += count

    def compact(self, keep: torch.Tensor, start: int) -> None:
        """Keep slots [0, start) plus the ascending absolute slots `keep` (all >= start).

        The kept slots move down to [start, start + len(keep)) in place.
        """
        n = int(keep.numel())
        if n:
            keep = keep.to(self.k.device)
            self.k[:, :, :, start : start + n] = self.k[:, :, :, keep]
            self.v[:, :, :, start : start + n] = self.v[:, :, :, keep]
        self.length = start + n

    def truncate(self, length: int) -> None:
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a cache of length {self.length} to {length}")
        self.length = length
