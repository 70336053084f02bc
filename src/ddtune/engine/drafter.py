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

Inference call: pass `cache=DrafterCache`; `context_feats` are then only the
NEW context features (appended to the cache) and attention covers the last
`window` cached context positions plus the block.
"""

from __future__ import annotations

import torch
from torch import nn

from ddtune.engine.config import DrafterConfig
from ddtune.engine.layers import MLP, RMSNorm, apply_rope, attend, rope_inv_freq, rope_tables
from ddtune.engine.model import Attention


class DrafterCache:
    """Context keys/values per drafter layer: [layers, B, kv_heads, capacity, head_dim]."""

    def __init__(self, cfg: DrafterConfig, capacity: int, batch: int, dtype, device) -> None:
        shape = (cfg.num_hidden_layers, batch, cfg.num_key_value_heads, capacity, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.capacity = capacity
        self.length = 0

    def truncate(self, length: int) -> None:
        self.length = min(self.length, length)


class DrafterAttention(Attention):
    """The target's Qwen3 attention weights (q/k norm included); DFlash wiring in forward."""

    def keys(self, x: torch.Tensor, rope) -> tuple[torch.Tensor, torch.Tensor]:
        """k, v [B, kv_heads, T, D] for inputs x [B, T, H] (RoPE applied to k)."""
        b, t, _ = x.shape
        k = self.k_norm(self.k_proj(x).view(b, t, self.kv_heads, self.head_dim))
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        return apply_rope(k.transpose(1, 2), *rope), v

    def forward(self, x, q_rope, ctx_kv, mask) -> torch.Tensor:
        """x [B, Q, H] (normed block), ctx_kv: context k, v [B, kv_heads, C, D]."""
        b, t, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, t, self.heads, self.head_dim))
        q = apply_rope(q.transpose(1, 2), *q_rope)
        k_blk, v_blk = self.keys(x, q_rope)
        k = torch.cat([ctx_kv[0], k_blk], dim=2)  # [B, kv_heads, C+Q, D]
        v = torch.cat([ctx_kv[1], v_blk], dim=2)
        return self.o_proj(attend(q, k, v, mask, causal=False))


class DrafterLayer(nn.Module):
    def __init__(self, cfg: DrafterConfig) -> None:
        super().__init__()
        self.self_attn = DrafterAttention(cfg)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x, q_rope, ctx_kv, mask) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), q_rope, ctx_kv, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class DFlashDrafter(nn.Module):
    def __init__(self, cfg: DrafterConfig) -> None:
        super().__init__()
        self.cfg = cfg
        h = cfg.hidden_size
        self.fc = nn.Linear(len(cfg.target_layer_ids) * h, h, bias=False)
        self.hidden_norm = RMSNorm(h, cfg.rms_norm_eps)
        self.layers = nn.ModuleList(DrafterLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(h, cfg.rms_norm_eps)
        self.register_buffer("inv_freq", rope_inv_freq(cfg), persistent=False)

    def new_cache(self, capacity: int, batch: int = 1) -> DrafterCache:
        w = self.fc.weight
        return DrafterCache(self.cfg, capacity, batch, w.dtype, w.device)

    def forward(
        self,
        noise_embeds: torch.Tensor,  # [B, Q, H]
        context_feats: torch.Tensor,  # [B, C, L*H] raw concatenated target hidden states
        q_positions: torch.Tensor,  # [B, Q]
        c_positions: torch.Tensor,  # [B, C]
        attn_mask: torch.Tensor | None = None,  # bool [B|1, Q, C'+Q], None = attend everything
        cache: DrafterCache | None = None,
        window: int | None = None,
    ) -> torch.Tensor:
        ctx = self.hidden_norm(self.fc(context_feats))  # [B, C, H]
        c_rope = rope_tables(self.inv_freq, c_positions, ctx.dtype)
        q_rope = rope_tables(self.inv_freq, q_positions, ctx.dtype)
        x = noise_embeds
        c = ctx.shape[1]
        if cache is not None and cache.length + c > cache.capacity:
            raise ValueError(
                f"drafter cache holds {cache.capacity} positions; needs {cache.length + c}"
            )
        for i, layer in enumerate(self.layers):
            k, v = layer.self_attn.keys(ctx, c_rope)  # [B, kv_heads, C, D]
            if cache is not None:
                end = cache.length + c
                cache.k[i, :, :, cache.length : end] = k
                cache.v[i, :, :, cache.length : end] = v
                k, v = _window(cache, i, end, window)
            x = layer(x, q_rope, (k, v), attn_mask)
        if cache is not None:
            cache.length += c
        return self.norm(x)  # [B, Q, H]


def _window(
    cache: DrafterCache, layer: int, end: int, window: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Context keys/values of the last `window` positions up to `end` (all when None)."""
    start = 0 if window is None else max(0, end - window)
    return cache.k[layer, :, :, start:end], cache.v[layer, :, :, start:end]
