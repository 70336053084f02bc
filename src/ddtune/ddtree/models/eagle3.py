"""The EAGLE-3 draft head, in the layout released heads use and vLLM and SGLang load.

Weights (safetensors names; `Eagle3Config` for config.json):

    fc.weight                         [H, 3 * H_target]  three target features -> H
    midlayer.input_layernorm.weight   [H]                norm of the token embedding
    midlayer.hidden_norm.weight       [H]                norm of the incoming hidden state
    midlayer.self_attn.q_proj.weight  [heads * D, 2H]    q/k/v read [embedding ; hidden]
    midlayer.self_attn.{k,v}_proj     [kv_heads * D, 2H]
    midlayer.self_attn.o_proj.weight  [H, heads * D]
    midlayer.post_attention_layernorm.weight, midlayer.mlp.{gate,up,down}_proj.weight
    norm.weight                       [H]
    lm_head.weight                    [draft_vocab, H]
    d2t  int64 [draft_vocab]          target id = draft id + d2t[draft id]
    t2d  bool  [vocab]                which target ids the draft vocabulary holds

No embedding: the head embeds its tokens with the target's `embed_tokens`.

One draft step at position p (vLLM's `Eagle3LlamaForCausalLM`, one layer):

    x      = [input_layernorm(embed(token)) ; hidden_norm(h)]    h: fc(features) at step 0,
    r      = h + o_proj(attention(x at p, over earlier keys))       else the last step's `out`
    out    = r + mlp(post_attention_layernorm(r))
    logits = lm_head(norm(out))                                    over the draft vocabulary

Step 0 runs at every position of the context (the target's features there and the
next token); step k > 0 continues from step k - 1's `out` at the same anchor, one
position further on, and attends to the context keys (step 0's) plus its own chain.
`unroll` runs `steps` such steps at every position at once: the training-time test
of EAGLE-3 (the head fed its own hidden states), and, teacher-forced, every chain a
decoding at T = 0 would draft. See docs/ddtree.md "Train".
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ddtune.ddtree.models.config import Eagle3Config
from ddtune.ddtree.models.layers import MLP, QKVOLinears, RMSNorm, additive_mask, attend
from ddtune.ddtree.models.rope import Rope, RopeTable, apply_rope, rope_inv_freq

Embed = Callable[[torch.Tensor], torch.Tensor]  # token ids [..] -> embeddings [.., H]


class Eagle3Attention(QKVOLinears):
    """Llama attention (no q/k norm) whose q/k/v read the doubled input [embedding ; hidden]."""

    def __init__(self, cfg: Eagle3Config) -> None:
        super().__init__(cfg, 2 * cfg.hidden_size)

    def project(self, x: torch.Tensor, rope: Rope) -> tuple[torch.Tensor, ...]:
        """q [B, heads, T, D], k, v [B, kv_heads, T, D] for x [B, T, 2H]; RoPE on q and k."""
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        return apply_rope(q, *rope), apply_rope(k, *rope), v


class MidLayer(nn.Module):
    """The head's one decoder layer (Hugging Face names under `midlayer.`)."""

    def __init__(self, cfg: Eagle3Config) -> None:
        super().__init__()
        h, eps = cfg.hidden_size, cfg.rms_norm_eps
        self.input_layernorm = RMSNorm(h, eps)
        self.hidden_norm = RMSNorm(h, eps)
        self.self_attn = Eagle3Attention(cfg)
        self.post_attention_layernorm = RMSNorm(h, eps)
        self.mlp = MLP(cfg)


class Eagle3Head(nn.Module):
    inv_freq: torch.Tensor  # RoPE inverse frequencies (not saved)
    d2t: torch.Tensor  # int64 [draft_vocab]
    t2d: torch.Tensor  # bool [vocab]

    def __init__(self, cfg: Eagle3Config) -> None:
        super().__init__()
        self.cfg = cfg
        width = cfg.target_hidden_size or cfg.hidden_size
        self.fc = nn.Linear(3 * width, cfg.hidden_size, bias=False)
        self.midlayer = MidLayer(cfg)
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.draft_vocab_size, bias=False)
        self.register_buffer("d2t", torch.zeros(cfg.draft_vocab_size, dtype=torch.long))
        self.register_buffer("t2d", torch.ones(cfg.vocab_size, dtype=torch.bool))
        self.register_buffer("inv_freq", rope_inv_freq(cfg), persistent=False)
        self.rope = RopeTable()
        if cfg.draft_vocab_size != cfg.vocab_size:
            self.t2d.zero_()
            self.t2d[: cfg.draft_vocab_size] = True

    def set_vocabulary(self, target_ids: torch.Tensor) -> None:
        """The draft vocabulary: `target_ids` ascending, one per draft id (d2t and t2d)."""
        ids = target_ids.to(torch.long)
        inside = bool(((ids >= 0) & (ids < self.cfg.vocab_size)).all())
        if ids.shape != self.d2t.shape or bool((ids[1:] <= ids[:-1]).any()) or not inside:
            raise ValueError(
                f"need {self.d2t.shape[0]} ascending target ids below {self.cfg.vocab_size}"
            )
        self.d2t.copy_(ids - torch.arange(ids.shape[0]))
        self.t2d.zero_()
        self.t2d[ids] = True

    def target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        """Draft vocabulary ids -> the target's token ids."""
        return draft_ids + self.d2t[draft_ids]

    def draft_index(self) -> torch.Tensor:
        """int64 [vocab]: the draft id of each target id, -1 where the draft vocab lacks it."""
        index = torch.full((self.cfg.vocab_size,), -1, dtype=torch.long)
        draft = torch.arange(self.cfg.draft_vocab_size)
        index[self.target_ids(draft)] = draft
        return index

    def step(
        self,
        embeds: torch.Tensor,  # [B, T, H] the tokens' embeddings
        hidden: torch.Tensor,  # [B, T, H] fc(features) or the previous step's `out`
        rope: Rope,
        past: list[tuple[torch.Tensor, torch.Tensor]],  # keys/values the step may attend to
        mask: torch.Tensor | None,  # bool [B|1, T, S_past + T]
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """One draft step: (`out` [B, T, H], this step's keys/values)."""
        layer = self.midlayer
        x = torch.cat([layer.input_layernorm(embeds), layer.hidden_norm(hidden)], dim=-1)
        q, k, v = layer.self_attn.project(x, rope)
        keys = torch.cat([*(kv[0] for kv in past), k], dim=2)
        values = torch.cat([*(kv[1] for kv in past), v], dim=2)
        attended = attend(q, keys, values, additive_mask(mask, q.dtype), causal=False)
        r = hidden + layer.self_attn.o_proj(attended)
        return r + layer.mlp(layer.post_attention_layernorm(r)), (k, v)

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary logits [..., draft_vocab] of a step's `out`."""
        return self.lm_head(self.norm(out))

    def unroll(
        self, embed: Embed, ids: torch.Tensor, features: torch.Tensor, steps: int
    ) -> list[torch.Tensor]:
        """Draft logits [B, L, draft_vocab] of steps 0..steps-1 at every anchor position.

        `ids` [B, L] the tokens, `features` [B, L, 3 * H_target] the target's aux hidden
        states there. Step k at anchor t reads token ids[t + 1 + k] (0 past the end) at
        position t + k and predicts ids[t + 2 + k]; it attends to step 0's keys at
        anchors <= t and to its own chain (steps 1..k at anchor t), as drafting does.
        """
        b, length = ids.shape
        positions = torch.arange(length, device=ids.device).expand(b, length)
        hidden = self.fc(features)
        past: list[tuple[torch.Tensor, torch.Tensor]] = []
        out_logits = []
        for k in range(steps):
            tokens = torch.zeros_like(ids)
            tokens[:, : max(0, length - 1 - k)] = ids[:, 1 + k :]
            rope = self.rope(self.inv_freq, positions + k, hidden.dtype)
            mask = chain_mask(length, k, ids.device)[None]
            hidden, kv = self.step(embed(tokens), hidden, rope, past, mask)
            past.append(kv)
            out_logits.append(self.logits(hidden))
        return out_logits


def chain_mask(length: int, k: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """bool [L, (k + 1) * L]: step k at anchor t sees step 0 at anchors <= t and steps
    1..k at anchor t itself."""
    eye = torch.eye(length, dtype=torch.bool, device=device)
    causal = torch.ones(length, length, dtype=torch.bool, device=device).tril()
    return torch.cat([causal, *([eye] * k)], dim=1)
