"""The DFlash drafter in the public z-lab checkpoint format.

Weights: `fc` [H, L*H] over the concatenated target hidden states of
`target_layer_ids`, `hidden_norm`, Qwen3-style `layers.N.*` and a final
`norm`. No embedding and no LM head: the drafter embeds its block with the
target's `embed_tokens` and reads logits through the target's `lm_head`.

Attention: queries come from the block ("noise") positions; keys and values
come from [context features ; block], with RoPE at absolute positions. The
context features pass through `fc` and `hidden_norm` once and enter every
layer's k/v projections directly.

Training call (no cache):

    hidden = drafter(noise_embeds[B, Q, H], context_feats[B, C, L*H],
                     q_positions[B, Q], c_positions[B, C], attn_mask=bool[B|1, Q, C+Q])
    logits = target.lm_logits(hidden)                 # hidden is after the final norm

Inference call: pass `cache=drafter.new_cache(capacity)` (a `KVCache` of the
drafter's layers); `context_feats` are then only the NEW context features
(appended to the cache) and attention covers the last `window` cached context
positions plus the block. `ingest(context_feats, c_positions, cache)` writes
the context keys alone (batched decoding does it at prefill). See
docs/ddtree.md "Engine".
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ddtune.ddtree.cache import KVCache, KVStore
from ddtune.ddtree.models.config import DrafterConfig
from ddtune.ddtree.models.layers import (
    AttentionProjections,
    Layer,
    RMSNorm,
    additive_mask,
    attend,
    inference,
)
from ddtune.ddtree.models.linear import InferenceLinear
from ddtune.ddtree.models.rope import Rope, RopeTable, rope_inv_freq


@dataclass
class DraftContext:
    """The context side of one drafter call, shared by every layer."""

    feats: torch.Tensor  # [B, C, H] after `fc` and `hidden_norm`
    rope: Rope  # at the context positions
    cache: KVStore | None = None  # with a cache, `feats` are only the new positions
    window: int | None = None  # attend to the last `window` cached positions (None = all)


class DrafterAttention(AttentionProjections):
    """The target's Qwen3 attention weights (q/k norm included); DFlash wiring in forward."""

    def forward(
        self,
        x: torch.Tensor,  # [B, Q, H] the normed block
        q_rope: Rope,
        ctx: DraftContext,
        mask: torch.Tensor | None,  # additive [B|1, 1, Q, C'+Q]
        layer: int,
    ) -> torch.Tensor:
        q, k_blk, v_blk = self.project(x, q_rope)  # [B, heads | kv_heads, Q, D]
        k_ctx, v_ctx = self.keys(ctx.feats, ctx.rope)  # [B, kv_heads, C, D]
        if ctx.cache is not None:
            k_ctx, v_ctx = ctx.cache.write(layer, k_ctx, v_ctx, ctx.window)
        k = torch.cat([k_ctx, k_blk], dim=2)  # [B, kv_heads, C'+Q, D]
        v = torch.cat([v_ctx, v_blk], dim=2)
        return self.output(attend(q, k, v, mask, causal=False))


class DFlashDrafter(nn.Module):
    inv_freq: torch.Tensor  # a buffer: RoPE inverse frequencies

    def __init__(self, cfg: DrafterConfig) -> None:
        super().__init__()
        self.cfg = cfg
        h = cfg.hidden_size
        self.fc = nn.Linear(len(cfg.target_layer_ids) * h, h, bias=False)
        self.hidden_norm = RMSNorm(h, cfg.rms_norm_eps)
        self.layers = nn.ModuleList(
            Layer(cfg, DrafterAttention(cfg)) for _ in range(cfg.num_hidden_layers)
        )
        self.norm = RMSNorm(h, cfg.rms_norm_eps)
        self.register_buffer("inv_freq", rope_inv_freq(cfg), persistent=False)
        self.rope = RopeTable()
        self.fused_fc: InferenceLinear | None = None  # `fc` for inference, set by `fuse()`

    def fuse(self, pack: bool = True) -> None:
        """Inference weights, once after loading (and after any `.to()`): see `layers.py`."""
        for layer in self.layers:
            assert isinstance(layer, Layer)
            layer.fuse(pack)
        self.fused_fc = InferenceLinear(self.fc.weight, None, pack)

    def new_cache(self, capacity: int, batch: int = 1) -> KVCache:
        """A cache for the context keys/values of every drafter layer."""
        return KVCache.for_model(self.cfg, capacity, batch, self.fc.weight)

    def forward(
        self,
        noise_embeds: torch.Tensor,  # [B, Q, H]
        context_feats: torch.Tensor,  # [B, C, L*H] raw concatenated target hidden states
        q_positions: torch.Tensor,  # [B, Q]
        c_positions: torch.Tensor,  # [B, C]
        attn_mask: torch.Tensor | None = None,  # bool [B|1, Q, C'+Q], None = attend everything
        cache: KVStore | None = None,
        window: int | None = None,
    ) -> torch.Tensor:
        feats = self.features(context_feats)  # [B, C, H]
        c_rope = self.rope(self.inv_freq, c_positions, feats.dtype)
        q_rope = self.rope(self.inv_freq, q_positions, feats.dtype)
        ctx = DraftContext(feats, c_rope, cache, window)
        mask = additive_mask(attn_mask, feats.dtype)
        x = noise_embeds
        for i, layer in enumerate(self.layers):
            x = layer(x, q_rope, ctx, mask, i)
        if cache is not None:
            cache.advance(feats.shape[1])
        return self.norm(x)  # [B, Q, H]

    def features(self, context_feats: torch.Tensor) -> torch.Tensor:
        """hidden_norm(fc(context_feats)): [B, C, L*H] -> [B, C, H]."""
        fc = inference(self.fused_fc) or self.fc
        return self.hidden_norm(fc(context_feats))

    def ingest(
        self, context_feats: torch.Tensor, c_positions: torch.Tensor, cache: KVStore
    ) -> None:
        """Write the context keys/values of new features into `cache`, without a block.

        The same keys `forward` writes for them (they do not depend on the
        block), so a later `forward` with no new context attends to identical
        keys. Batched decoding ingests a prompt's features at prefill.
        """
        feats = self.features(context_feats)  # [B, C, H]
        rope = self.rope(self.inv_freq, c_positions, feats.dtype)
        for i, layer in enumerate(self.layers):
            attention = layer.self_attn
            assert isinstance(attention, DrafterAttention)
            cache.write(i, *attention.keys(feats, rope))
        cache.advance(feats.shape[1])
