"""The DFlash drafter: cached windowed inference equals the masked training call."""

from __future__ import annotations

import pytest
import torch

from ddtune.ddtree.cache import KVCache
from ddtune.ddtree.models.loading import load_decoder, load_drafter
from ddtune.ddtree.testing import write_random_checkpoint
from ddtune.errors import UserError


def _setup(tmp_path):
    target_dir, drafter_dir = write_random_checkpoint(tmp_path, seed=3, block_size=4)
    target, drafter = load_decoder(target_dir), load_drafter(drafter_dir)
    ids = torch.randint(2, 60, (1, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        feats = torch.cat(target(ids, hidden_layer_ids=drafter.cfg.target_layer_ids).hidden, -1)
    block = torch.tensor([[7, 1, 1, 1]])
    return target, drafter, feats, target.embed(block).detach()


def test_cached_window_equals_masked_full_call(tmp_path):
    target, drafter, feats, noise = _setup(tmp_path)
    c_pos, q_pos = torch.arange(12)[None], torch.arange(12, 16)[None]
    for window in (None, 3, 12, 50):
        visible = torch.ones(1, 4, 16, dtype=torch.bool)
        if window is not None:
            visible[:, :, : max(0, 12 - window)] = False
        with torch.no_grad():
            ref = drafter(noise, feats, q_pos, c_pos, attn_mask=visible)
            cache = drafter.new_cache(32)
            drafter(noise, feats[:, :9], q_pos, c_pos[:, :9], cache=cache, window=window)
            got = drafter(noise, feats[:, 9:], q_pos, c_pos[:, 9:], cache=cache, window=window)
        assert cache.length == 12
        assert (got - ref).abs().max().item() < 1e-5


def test_drafter_cache_is_a_kv_cache_of_its_layers_and_overflow_is_clear(tmp_path):
    target, drafter, feats, noise = _setup(tmp_path)
    cache = drafter.new_cache(10)
    cfg = drafter.cfg
    assert isinstance(cache, KVCache)
    assert cache.k.shape == (cfg.num_hidden_layers, 1, cfg.num_key_value_heads, 10, cfg.head_dim)
    with torch.no_grad(), pytest.raises(UserError, match="context holds 10"):
        drafter(noise, feats, torch.arange(12, 16)[None], torch.arange(12)[None], cache=cache)
    assert cache.length == 0


def test_window_changes_the_draft(tmp_path):
    target, drafter, feats, noise = _setup(tmp_path)
    c_pos, q_pos = torch.arange(12)[None], torch.arange(12, 16)[None]
    with torch.no_grad():
        full = drafter(noise, feats, q_pos, c_pos, cache=drafter.new_cache(32))
        short = drafter(noise, feats, q_pos, c_pos, cache=drafter.new_cache(32), window=2)
    assert (full - short).abs().max().item() > 1e-3


def test_drafter_trains(tmp_path):
    target, drafter, feats, noise = _setup(tmp_path)
    drafter.train()
    hidden = drafter(noise, feats, torch.arange(12, 16)[None], torch.arange(12)[None])
    loss = target.lm_logits(hidden).logsumexp(-1).mean()
    loss.backward()
    assert drafter.fc.weight.grad is not None and drafter.fc.weight.grad.abs().sum() > 0
