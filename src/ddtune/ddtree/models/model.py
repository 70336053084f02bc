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

See docs/ddtree.md "Engine".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from ddtune.ddtree.cache import KVCache, KVStore
from ddtune.ddtree.models.config import ModelConfig
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
class DecoderOutput:
    logits: torch.Tensor | None  # [B, T, V] ([B, 1, V] with last_logits_only; None without logits)
    hidden: list[torch.Tensor] = field(default_factory=list)  # per requested layer id: [B, T, H]
    final: torch.Tensor | None = None  # [B, T, H] after the final norm (with logits=False)


class Attention(AttentionProjections):
    """Causal (or masked) self-attention over the cache and the new tokens."""

    def forward(
        self,
        x: torch.Tensor,  # [B, T, H]
        rope: Rope,
        mask: torch.Tensor | None,  # additive [B|1, 1, T, S]
        cache: KVStore | None,
        layer: int,
    ) -> torch.Tensor:
        q, k, v = self.project(x, rope)  # [B, heads | kv_heads, T, D]
        if cache is not None:
            k, v = cache.write(layer, k, v)  # [B, kv_heads, S, D]
        causal = mask is None and cache is None and x.shape[1] > 1
        return self.output(attend(q, k, v, mask, causal))


class Backbone(nn.Module):
    """Holds the weights under the Hugging Face `model.` prefix."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(
            Layer(cfg, Attention(cfg)) for _ in range(cfg.num_hidden_layers)
        )
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class Decoder(nn.Module):
    inv_freq: torch.Tensor  # a buffer: RoPE inverse frequencies

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = Backbone(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.register_buffer("inv_freq", rope_inv_freq(cfg), persistent=False)
        self.rope = RopeTable()
        self.head: InferenceLinear | None = None  # the LM head, set by `fuse()`

    def fuse(self, pack: bool = True) -> None:
        """Inference weights, once after loading (and after any `.to()`): see `layers.py`.

        With `pack`, every linear keeps a oneDNN-packed copy and the LM head a
        transposed one for single rows (`linear.py`); `pack=False` (models over
        `linear.MAX_COPIED_BYTES`) keeps MKL's `F.linear` and no copies.
        """
        for layer in self.model.layers:
            assert isinstance(layer, Layer)
            layer.fuse(pack)
        self.head = InferenceLinear(self.lm_head.weight, None, pack, row_copy=pack)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """Token embeddings [..., H] (the drafter embeds its block with these)."""
        return self.model.embed_tokens(ids)

    def lm_logits(self, h: torch.Tensor) -> torch.Tensor:
        """LM head only, final norm NOT applied: logits [..., V]."""
        return (inference(self.head) or self.lm_head)(h)

    def new_cache(self, capacity: int, batch: int = 1) -> KVCache:
        return KVCache.for_model(self.cfg, capacity, batch, self.lm_head.weight)

    def forward(
        self,
        input_ids: torch.Tensor,  # [B, T]
        positions: torch.Tensor | None = None,  # [B, T]; default: cache.length + arange(T)
        cache: KVStore | None = None,
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
        rope = self.rope(self.inv_freq, positions, x.dtype)
        mask = additive_mask(attn_mask, x.dtype)
        wanted = {int(i) for i in hidden_layer_ids}
        if any(not 0 <= i < self.cfg.num_hidden_layers for i in wanted):
            raise ValueError(f"hidden_layer_ids {list(hidden_layer_ids)} outside the layers")
        outputs: dict[int, torch.Tensor] = {}  # layer id -> its output
        last = len(self.model.layers) - 1
        for i, layer in enumerate(self.model.layers):
            x = layer(x, rope, mask, cache, i)
            if i in wanted and i != last:
                outputs[i] = x
        if cache is not None:
            cache.advance(t)
        x = self.model.norm(x)
        outputs[last] = x
        hidden = [outputs[int(i)] for i in hidden_layer_ids]
        if not logits:
            return DecoderOutput(None, hidden, x)
        if last_logits_only:
            x = x[:, -1:]
        return DecoderOutput(self.lm_logits(x), hidden)


def causal_mask(past: int, t: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """bool [1, t, past + t]: every new token sees the past and the new tokens up to itself."""
    rows = torch.arange(t, device=device)[:, None]
    cols = torch.arange(past + t, device=device)[None, :]
    return (cols <= rows + past)[None]
