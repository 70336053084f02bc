"""The KV cache: append, windowed view (drafter), compact in place, truncate, overflow."""

from __future__ import annotations

import pytest
import torch

from ddtune.ddtree.cache import KVCache
from ddtune.errors import UserError


def _kv(values: list[float]) -> torch.Tensor:
    return torch.tensor(values).view(1, 1, -1, 1).expand(1, 2, -1, 3).clone()  # [B, h, T, D]


def test_append_compact_truncate():
    cache = KVCache(num_layers=2, num_kv_heads=2, head_dim=3, capacity=10)
    storage = cache.k.data_ptr()
    for layer in range(2):
        k, _ = cache.write(layer, _kv([0, 1, 2]), _kv([0, 1, 2]))
        assert k.shape == (1, 2, 3, 3)
    cache.advance(3)
    for layer in range(2):
        k, v = cache.write(layer, _kv([10, 11, 12, 13]), _kv([20, 21, 22, 23]))
        assert k.shape[2] == 7
    cache.advance(4)
    cache.compact(torch.tensor([3, 5, 6]), start=3)  # keep the tree slots 3, 5, 6
    assert cache.length == 6
    assert cache.k[1, 0, 0, :6, 0].tolist() == [0, 1, 2, 10, 12, 13]
    assert cache.v[0, 0, 1, :6, 2].tolist() == [0, 1, 2, 20, 22, 23]
    assert cache.k.data_ptr() == storage  # in place
    cache.truncate(4)
    assert cache.length == 4
    with pytest.raises(ValueError):
        cache.truncate(5)


def test_overflow_is_a_clear_error():
    cache = KVCache(num_layers=1, num_kv_heads=2, head_dim=3, capacity=2)
    with pytest.raises(UserError, match="context holds 2"):
        cache.write(0, _kv([1, 2, 3]), _kv([1, 2, 3]))


def test_window_returns_only_the_last_slots_and_still_stores_all():
    cache = KVCache(num_layers=1, num_kv_heads=2, head_dim=3, capacity=10)
    cache.write(0, _kv([0, 1, 2, 3, 4]), _kv([0, 1, 2, 3, 4]))
    cache.advance(5)
    k, v = cache.write(0, _kv([5, 6, 7]), _kv([15, 16, 17]), window=4)
    assert k[0, 1, :, 0].tolist() == [4, 5, 6, 7] and v[0, 0, :, 2].tolist() == [4, 15, 16, 17]
    cache.advance(3)
    assert cache.k[0, 0, 0, :8, 0].tolist() == [0, 1, 2, 3, 4, 5, 6, 7]
    for window in (None, 9, 100):
        k, _ = cache.write(0, _kv([8]), _kv([8]), window=window)
        assert k.shape[2] == 9
    k, _ = cache.write(0, _kv([8]), _kv([8]), window=1)
    assert k[0, 0, :, 0].tolist() == [8]
