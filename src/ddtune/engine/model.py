"""The target decoder: Qwen3 and Llama families in plain PyTorch, Hugging Face weight names.

One module serves training and inference:

    out = model(input_ids[B, T])                     # training: causal, no cache
    out = model(ids, positions=pos[B, T], cache=kv,  # inference: appends T keys to the
                attn_mask=bool[B|1, T, S])           #   cache; S = cache.length + T
    out.logits  [B, T, V]
    out.hidden  list of [B, T, H], one per id in `hidden_layer_ids`

Hidden-state convention (DFlash `target_layer_ids`): id i is the output of
decoder layer i, i.e. Hugging Face `hidden_states[i + 1]`. For the last layer
Hugging Face reports that output after the final norm, and so do we.

Helpers for the drafter: `embed(ids)` is the token embedding; `lm_logits(h)`
is the LM head alone (final norm excluded: the drafter applies its own norm).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from ddtune.engine.cache import KVCache
from ddtune.engine.config import ModelConfig
from ddtune.engine.layers import MLP, RMSNorm, apply_rope, attend, rope_inv_freq, rope_tables


@dataclass
class DecoderOutput:
    logits: torch.Tensor | None  # [B, T, V] ([B, 1, V] with last_logits_only; None without logits)
    hidden: list[torch.Tensor] = field(default_factory=list)  # per requested layer id: [B, T, H]
    final: torch.Tensor | None = None  # [B, T, H] after the final norm (with logits=False)


class Attention(nn.Module):
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
        if cfg.uses_qk_norm:
            self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)

    def forward(
        self,
        x: torch.Tensor,  # [B, T, H]
        rope: tuple[torch.Tensor, torch.Tensor],
        mask: torch.Tensor | None,
        cache: KVCache | None,
        layer: int,
    ) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        q = apply_rope(q.transpose(1, 2), *rope)  # [B, heads, T, D]
        k = apply_rope(k.transpose(1, 2), *rope)  # [B, kv_heads, T, D]
        if cache is not None:
            k, v = cache.write(layer, k, v)  # [B, kv_heads, S, D]
        causal = mask is None and cache is None and t > 1
        return self.o_proj(attend(q, k, v, mask, causal))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x, rope, mask, cache, layer) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), rope, mask, cache, layer)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    """Holds the weights under the Hugging Face `model.` prefix."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class Decoder(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = Backbone(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.register_buffer("inv_freq", rope_inv_freq(cfg), persistent=False)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """Token embeddings [..., H] (the drafter embeds its block with these)."""
        return self.model.embed_tokens(ids)

    def lm_logits(self, h: torch.Tensor) -> torch.Tensor:
        """LM head only, final norm NOT applied: logits [..., V]."""
        return self.lm_head(h)

    def new_cache(self, capacity: int, batch: int = 1) -> KVCache:
        cfg, w = self.cfg, self.lm_head.weight
        return KVCache(
            cfg.num_hidden_layers,
            cfg.num_key_value_heads,
            cfg.head_dim,
            capacity,
            batch,
            w.dtype,
            w.device,
        )

    def forward(
        self,
        input_ids: torch.Tensor,  # [B, T]
        positions: torch.Tensor | None = None,  # [B, T]; default: cache.length + arange(T)
        cache: KVCache | None = None,
        attn_mask: torch.Tensor | None = None,  # bool [B|1, T, S], True = may attend
        hidden_layer_ids: Sequence[int] = (),
        last_logits_only: bool = False,
        logits: bool = True,  # False: skip the LM head, return `final` (lm_logits(final) later)
    ) -> DecoderOutput:
        b, t = input_ids.shape
        past = cache.length if cache is not None else 0
        if positions is None:
            positions = torch.arange(past, past + t, device=input_ids.device).expand(b, t)
        if attn_mask is None and cache is not None and t > 1:
            attn_mask = causal_mask(past, t, input_ids.device)
        x = self.embed(input_ids)  # [B, T, H]
        rope = rope_tables(self.inv_freq, positions, x.dtype)
        wanted = {int(i): n for n, i in enumerate(hidden_layer_ids)}
        if any(not 0 <= i < self.cfg.num_hidden_layers for i in wanted):
            raise ValueError(f"hidden_layer_ids {list(hidden_layer_ids)} outside the layers")
        hidden: list[torch.Tensor | None] = [None] * len(hidden_layer_ids)
        last = len(self.model.layers) - 1
        for i, layer in enumerate(self.model.layers):
            x = layer(x, rope, attn_mask, cache, i)
            if i in wanted and i != last:
                hidden[wanted[i]] = x
        if cache is not None:
            cache.advance(t)
        x = self.model.norm(x)
        if last in wanted:
            hidden[wanted[last]] = x
        if not logits:
            return DecoderOutput(None, hidden, x)  # type: ignore[arg-type]
        if last_logits_only:
            x = x[:, -1:]
        return DecoderOutput(self.lm_head(x), hidden)  # type: ignore[arg-type]


def causal_mask(past: int, t: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """bool [1, t, past + t]: every new token sees the past and the new tokens up to itself."""
    rows = torch.arange(t, device=device)[:, None]
    cols = torch.arange(past + t, device=device)[None, :]
    return (cols <= rows + past)[None]
