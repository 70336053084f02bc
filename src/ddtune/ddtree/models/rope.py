"""Rotary position embedding: inverse frequencies, a cos/sin table per model, the rotation.

`rope_inv_freq(cfg)` follows the Hugging Face code (default, linear and
llama3 scaling). `RopeTable` holds cos and sin for positions [0, P) in
float32, computed once (and grown when a longer position comes), so a
forward pass only indexes it by its positions instead of recomputing
cos/sin. The table's sin carries the sign of the rotate-half convention,
so `apply_rope` needs one `roll` instead of slice/negate/concatenate: the
values are exactly those of the computed tables (`rope_tables`, kept as the
reference the tests compare against). See docs/ddtree.md "Engine".
"""

from __future__ import annotations

import math

import torch

from ddtune.ddtree.models.config import ModelConfig

Rope = tuple[torch.Tensor, torch.Tensor]  # cos, signed sin [B, 1, T, head_dim]

MIN_TABLE = 256  # positions in a new table; it doubles while a position falls outside


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


class RopeTable:
    """cos and signed sin [P, head_dim] for positions [0, P), indexed per forward pass.

    Built from the model's `inv_freq` buffer on first use, rebuilt when a
    position falls outside it or the buffer moved to another device.
    """

    def __init__(self) -> None:
        self.cos = self.sin = torch.empty(0)

    def __call__(self, inv_freq: torch.Tensor, positions: torch.Tensor, dtype: torch.dtype) -> Rope:
        """cos, signed sin [B, 1, T, head_dim] for integer positions [B, T]."""
        size = self.cos.shape[0] if self.cos.device == inv_freq.device else 0
        top = int(positions.max()) if positions.numel() else -1  # one host sync
        if top >= size:
            self._build(inv_freq, max(2 * size, MIN_TABLE, top + 1))
        cos, sin = self.cos[positions], self.sin[positions]  # [B, T, D]
        if dtype != cos.dtype:
            cos, sin = cos.to(dtype), sin.to(dtype)
        return cos[:, None], sin[:, None]

    def _build(self, inv_freq: torch.Tensor, size: int) -> None:
        with torch.inference_mode(False):  # normal tensors: training forwards use them too
            positions = torch.arange(size, device=inv_freq.device)[None]  # [1, P]
            cos, sin = rope_tables(inv_freq, positions, torch.float32)
        self.cos, self.sin = cos[0, 0], sin[0, 0]  # [P, D]


def rope_tables(inv_freq: torch.Tensor, positions: torch.Tensor, dtype: torch.dtype) -> Rope:
    """Computed cos, signed sin [B, 1, T, head_dim] for integer positions [B, T]."""
    freqs = positions[..., None].float() * inv_freq.float()  # [B, T, D/2]
    emb = torch.cat((freqs, freqs), dim=-1)  # [B, T, D]
    sin = emb.sin()
    half = sin.shape[-1] // 2
    sin[..., :half] = -sin[..., :half]  # rotate-half: the first half rotates with -sin
    return emb.cos().to(dtype)[:, None], sin.to(dtype)[:, None]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, heads, T, D] rotated by the tables (rotate-half convention, signed sin).

    Equals `x * cos + cat(-x2, x1) * sin` (x1, x2 the halves of x): the roll
    gives cat(x2, x1) and the signed sin carries the minus.
    """
    return x * cos + x.roll(x.shape[-1] // 2, dims=-1) * sin
