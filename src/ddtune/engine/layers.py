"""Building blocks shared by the target decoder and the DFlash drafter.

RMSNorm, rotary position embedding (default, linear and llama3 scaling), the
SwiGLU MLP, the attention projections (q/k/v/o, Qwen3 q/k norms), one
layer's residual frame and attention over explicit boolean masks. Numerics
follow the Hugging Face Qwen3/Llama code (norms and RoPE tables in float32).
See docs/architecture.md "Engine".
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ddtune.engine.config import ModelConfig


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        h, i, bias = cfg.hidden_size, cfg.intermediate_size, cfg.mlp_bias
        self.gate_proj = nn.Linear(h, i, bias=bias)
        self.up_proj = nn.Linear(h, i, bias=bias)
        self.down_proj = nn.Linear(i, h, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


Rope = tuple[torch.Tensor, torch.Tensor]  # cos, sin [B, 1, T, head_dim]


class AttentionProjections(nn.Module):
    """q/k/v/o projections (and Qwen3's q/k norms) under the Hugging Face names."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = (
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
        )
        h, bias = cfg.hidden_size, cfg.attention_bias
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=bias)
        self.qk_norm = cfg.uses_qk_norm
        if self.qk_norm:
            self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)

    def queries(self, x: torch.Tensor, rope: Rope) -> torch.Tensor:
        """q [B, heads, T, D] for inputs x [B, T, H], RoPE applied."""
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim)
        if self.qk_norm:
            q = self.q_norm(q)
        return apply_rope(q.transpose(1, 2), *rope)

    def keys(self, x: torch.Tensor, rope: Rope) -> tuple[torch.Tensor, torch.Tensor]:
        """k, v [B, kv_heads, T, D] for inputs x [B, T, H], RoPE applied to k."""
        b, t, _ = x.shape
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.qk_norm:
            k = self.k_norm(k)
        return apply_rope(k.transpose(1, 2), *rope), v


class Layer(nn.Module):
    """One pre-norm layer (HF names): `self_attn` then the SwiGLU `mlp`, each with a residual.

    The attention module decides the wiring: `forward(x, *attn_args)` passes
    `attn_args` on to `self_attn(input_layernorm(x), *attn_args)`.
    """

    def __init__(self, cfg: ModelConfig, self_attn: nn.Module) -> None:
        super().__init__()
        self.self_attn = self_attn
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x: torch.Tensor, *attn_args: object) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), *attn_args)
        return x + self.mlp(self.post_attention_layernorm(x))


def rope_inv_freq(cfg: ModelConfig) -> torch.Tensor:
    """Inverse frequencies [head_dim / 2], with linear or llama3 scaling applied."""
    d = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    scaling = cfg.rope_scaling or {}
    kind = scaling.get("rope_type", "default")
    if kind == "linear":
        return inv / float(scaling["factor"])
    if kind != "llama3":
        return inv
    factor = float(scaling["factor"])
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    old_len = float(scaling["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > old_len / low, inv / factor, inv)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old_len / high) & (wavelen <= old_len / low)
    return torch.where(medium, smoothed, scaled)


def rope_tables(inv_freq: torch.Tensor, positions: torch.Tensor, dtype: torch.dtype) -> Rope:
    """cos, sin [B, 1, T, head_dim] for integer positions [B, T]."""
    freqs = positions[..., None].float() * inv_freq.float()  # [B, T, D/2]
    emb = torch.cat((freqs, freqs), dim=-1)  # [B, T, D]
    return emb.cos().to(dtype)[:, None], emb.sin().to(dtype)[:, None]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, heads, T, D] rotated by the tables (rotate-half convention)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    causal: bool,
) -> torch.Tensor:
    """q [B, H, T, D], k/v [B, Hkv, S, D], mask bool [B|1, T, S] (True = attend) -> [B, T, H*D]."""
    out = F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=None if mask is None else mask[:, None],
        is_causal=causal,
        enable_gqa=q.shape[1] != k.shape[1],
    )
    b, h, t, d = out.shape
    return out.transpose(1, 2).reshape(b, t, h * d)
