"""One preallocated key/value cache, written in place, for the target and the drafter.

Layout per tensor: [num_layers, B, kv_heads, capacity, head_dim]. Slots
[0, length) are valid. A forward pass with the cache writes its T new keys at
[length, length + T) in every layer (`write`), then the caller advances the
length once (`advance`). `write` returns the keys a layer attends to: all of
them, or with `window=W` (the DFlash drafter) only the last W. After a tree
verify, `compact` keeps the accepted slots and moves them down in place;
`truncate` drops the tail. `KVStore` is what a forward pass needs of a
cache (`length`, `write`, `advance`); the slotted cache of batched decoding
(`slots.SlotView`) provides it too. See docs/ddtree.md "Engine".
"""

from __future__ import annotations

from typing import Protocol

import torch

from ddtune.errors import UserError


class CacheShape(Protocol):
    """What a cache reads of a model's config (`models.config.ModelConfig` is one; naming
    only this keeps the cache below the models that use it)."""

    @property
    def num_hidden_layers(self) -> int: ...

    @property
    def num_key_value_heads(self) -> int: ...

    @property
    def head_dim(self) -> int: ...


class KVStore(Protocol):
    """The cache interface of one forward pass (`Decoder`, `DFlashDrafter`)."""

    @property
    def length(self) -> int: ...

    def write(
        self, layer: int, k: torch.Tensor, v: torch.Tensor, window: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]: ...

    def advance(self, count: int) -> None: ...


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

    @classmethod
    def for_model(cls, cfg: CacheShape, capacity: int, batch: int, like: torch.Tensor) -> KVCache:
        """A cache for the layers of `cfg`, with the dtype and device of the tensor `like`."""
        return cls(
            cfg.num_hidden_layers,
            cfg.num_key_value_heads,
            cfg.head_dim,
            capacity,
            batch,
            like.dtype,
            like.device,
        )

    def write(
        self, layer: int, k: torch.Tensor, v: torch.Tensor, window: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v [B, kv_heads, T, head_dim] after the valid slots.

        Returns the keys and values so far, or only the last `window` of them.
        """
        end = self.length + k.shape[2]
        if end > self.capacity:
            raise UserError(
                f"the sequence needs {end} cache slots but the context holds {self.capacity}"
            )
        self.k[layer, :, :, self.length : end] = k
        self.v[layer, :, :, self.length : end] = v
        start = 0 if window is None else max(0, end - window)
        return self.k[layer, :, :, start:end], self.v[layer, :, :, start:end]

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
