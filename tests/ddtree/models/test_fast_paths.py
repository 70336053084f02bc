"""The inference fast paths equal the plain ones: fused projections, packed linears, RoPE table."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
import torch.nn.functional as F

import ddtune.ddtree.models.linear as linear
from ddtune.ddtree.models.drafter import DFlashDrafter
from ddtune.ddtree.models.layers import additive_mask, attend
from ddtune.ddtree.models.linear import InferenceLinear, can_pack, worth_copying
from ddtune.ddtree.models.model import Decoder
from ddtune.ddtree.models.rope import MIN_TABLE, RopeTable, apply_rope, rope_inv_freq, rope_tables
from ddtune.ddtree.testing import LLAMA3_SCALING, random_configs, randomize


def _models(family: str = "qwen3", bias: bool = False) -> tuple[Decoder, DFlashDrafter]:
    target_cfg, drafter_cfg = random_configs(family=family, num_layers=3)
    if bias:
        target_cfg = dataclasses.replace(target_cfg, attention_bias=True, mlp_bias=True)
    target, drafter = Decoder(target_cfg), DFlashDrafter(drafter_cfg)
    gen = torch.Generator().manual_seed(5)
    randomize(target, gen, 0.15)
    randomize(drafter, gen, 0.15)
    return target.eval(), drafter.eval()


def _run(target: Decoder, ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Prefill, then a tree-shaped verify step through the cache; logits and hidden states."""
    cache = target.new_cache(64)
    with torch.inference_mode():
        first = target(ids[:, :10], cache=cache, hidden_layer_ids=[0, 2])
        mask = torch.ones(1, 6, 16, dtype=torch.bool)
        mask[0, 3, 11:13] = False  # node 3 does not see nodes 1 and 2
        positions = 10 + torch.tensor([[0, 1, 2, 1, 2, 3]])
        out = target(ids[:, 10:16], positions=positions, cache=cache, attn_mask=mask)
    assert first.logits is not None and out.logits is not None
    return torch.cat([first.logits[:, -1:], out.logits], dim=1), first.hidden


@pytest.mark.parametrize("pack", [False, True])
@pytest.mark.parametrize(("family", "bias"), [("qwen3", False), ("llama", True)])
def test_fused_decoder_equals_unfused(family, bias, pack):
    plain, _ = _models(family, bias)
    fused = copy.deepcopy(plain)
    fused.fuse(pack)
    ids = torch.randint(
        0, plain.cfg.vocab_size, (1, 16), generator=torch.Generator().manual_seed(0)
    )
    (a, hidden_a), (b, hidden_b) = _run(plain, ids), _run(fused, ids)
    assert (a - b).abs().max().item() < 1e-4
    for x, y in zip(hidden_a, hidden_b, strict=True):
        assert (x - y).abs().max().item() < 1e-4
    assert fused.state_dict().keys() == plain.state_dict().keys()  # the HF names stay


@pytest.mark.parametrize("pack", [False, True])
def test_fused_drafter_equals_unfused(pack):
    target, plain = _models()
    fused = copy.deepcopy(plain)
    fused.fuse(pack)
    gen = torch.Generator().manual_seed(1)
    feats = torch.randn(
        1, 9, len(plain.cfg.target_layer_ids) * plain.cfg.hidden_size, generator=gen
    )
    noise = torch.randn(1, 4, plain.cfg.hidden_size, generator=gen)
    c_pos, q_pos = torch.arange(9)[None], torch.arange(9, 13)[None]
    with torch.inference_mode():
        a = plain(noise, feats, q_pos, c_pos, cache=plain.new_cache(32), window=6)
        b = fused(noise, feats, q_pos, c_pos, cache=fused.new_cache(32), window=6)
    assert (a - b).abs().max().item() < 1e-4


def test_fused_weights_follow_in_place_updates():
    """The named parameters are views of the fused weights; packed copies get rebuilt."""
    plain, _ = _models()
    fused = copy.deepcopy(plain)
    fused.fuse(pack=True)
    ids = torch.randint(
        0, plain.cfg.vocab_size, (1, 16), generator=torch.Generator().manual_seed(2)
    )
    _run(fused, ids)  # packs once
    with torch.no_grad():
        for model in (plain, fused):
            attention = model.model.layers[1].self_attn
            attention.k_proj.weight.mul_(1.5)
            attention.q_norm.weight.add_(0.1)
            model.model.layers[0].mlp.up_proj.weight.add_(0.01)
            model.lm_head.weight.mul_(0.5)
    (a, _), (b, _) = _run(plain, ids), _run(fused, ids)
    assert (a - b).abs().max().item() < 1e-4
    row = torch.randn(plain.cfg.hidden_size)
    assert (fused.lm_logits(row) - plain.lm_logits(row)).abs().max().item() < 1e-4


def test_inference_linear_equals_f_linear():
    gen = torch.Generator().manual_seed(3)
    weight, bias = torch.randn(48, 32, generator=gen), torch.randn(48, generator=gen)
    for pack in (False, True):
        for b in (None, bias):
            lin = InferenceLinear(weight, b, pack, row_copy=True)
            assert lin.pack == (pack and can_pack(weight))
            for shape in ((32,), (1, 32), (1, 1, 32), (5, 32), (2, 7, 32)):
                x = torch.randn(*shape, generator=gen)
                assert (lin(x) - F.linear(x, weight, b)).abs().max().item() < 1e-4


@pytest.mark.parametrize("scaling", [None, LLAMA3_SCALING])
def test_rope_table_equals_computed_tables(scaling):
    cfg, _ = random_configs(family="llama", rope_scaling=scaling)
    inv_freq = rope_inv_freq(cfg)
    table = RopeTable()
    for top in (5, MIN_TABLE + 3, 3 * MIN_TABLE):  # the table grows past its first size
        positions = torch.tensor([[0, top // 2, top], [1, 2, 3]])
        got, want = (
            table(inv_freq, positions, torch.float32),
            rope_tables(inv_freq, positions, torch.float32),
        )
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert table.cos.shape[0] > 3 * MIN_TABLE


def test_apply_rope_equals_rotate_half():
    """The signed-sin roll equals the Hugging Face rotate-half formula exactly."""
    cfg, _ = random_configs(family="llama")
    positions = torch.arange(7)[None]
    cos, signed_sin = rope_tables(rope_inv_freq(cfg), positions, torch.float32)
    freqs = positions[..., None].float() * rope_inv_freq(cfg)
    sin = torch.cat((freqs, freqs), dim=-1).sin()[:, None]
    x = torch.randn(1, 3, 7, cfg.head_dim, generator=torch.Generator().manual_seed(4))
    half = cfg.head_dim // 2
    expected = x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin
    assert torch.equal(apply_rope(x, cos, signed_sin), expected)


def test_additive_mask_equals_boolean_mask():
    gen = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(1, 4, 5, 8, generator=gen) for _ in range(3))
    mask = torch.rand(1, 5, 5, generator=gen) > 0.4
    mask[..., 0] = True
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])
    got = attend(q, k, v, additive_mask(mask, torch.float32), causal=False)
    assert (got - expected.transpose(1, 2).reshape(1, 5, 32)).abs().max().item() < 1e-6


def test_fused_model_still_trains():
    """With autograd on, gradients reach the named parameters after `fuse()`."""
    model, _ = _models()
    with torch.inference_mode():  # as an engine built inside inference mode would
        model.fuse(pack=True)
    ids = torch.randint(0, model.cfg.vocab_size, (2, 9), generator=torch.Generator().manual_seed(7))
    out = model(ids)
    assert out.logits is not None
    out.logits.logsumexp(-1).mean().backward()
    layer = model.model.layers[0]
    for param in (
        layer.self_attn.q_proj.weight,
        layer.self_attn.q_norm.weight,
        layer.mlp.up_proj.weight,
        layer.mlp.down_proj.weight,
        model.lm_head.weight,
    ):
        assert param.grad is not None and param.grad.abs().sum().item() > 0


def test_copies_only_for_small_models(monkeypatch):
    target, drafter = _models()
    assert worth_copying(target, drafter)
    monkeypatch.setattr(linear, "MAX_COPIED_BYTES", 1000)
    assert not worth_copying(target, drafter)
