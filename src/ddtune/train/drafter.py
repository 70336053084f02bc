"""Train a DFlash drafter for a trained target, as the public DFlash recipe does.

1. Self-distillation data: the frozen target continues training prompts
   greedily (`distill.py`), so the drafter learns to predict *this* target.
2. Each step takes a batch of those sequences and, per sequence, random
   anchors in the generated part. A block is `[token at anchor, MASK x (block-1)]`
   at positions anchor..anchor+block-1.
3. The frozen target runs over the sequences and returns the hidden states of
   `target_layer_ids`; a block may attend to these context features only at
   positions before its anchor, and to its own block bidirectionally.
4. Loss: cross-entropy of the target's LM head on the drafter output at block
   position k (1..block-1) against the token at anchor + k, weighted by
   exp(-(k-1)/gamma). The target's embedding and LM head are frozen (the whole
   target is); only the drafter's `fc`, `hidden_norm`, layers and norm learn.

See docs/ddtree.md "Train".
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ddtune.ddtree.models.config import DrafterConfig, ModelConfig
from ddtune.ddtree.models.drafter import DFlashDrafter
from ddtune.ddtree.models.loading import load_decoder, save_drafter
from ddtune.ddtree.models.model import Decoder
from ddtune.ddtree.models.tokenizer import Tokenizer
from ddtune.errors import UserError
from ddtune.train.common import Optimization, TrainProgress
from ddtune.train.configs import DrafterTrainConfig
from ddtune.train.distill import Example, distill_data
from ddtune.train.target import init_weights
from ddtune.train.tokenizer import MASK_TOKEN


def spread_layer_ids(num_target_layers: int, count: int = 3) -> list[int]:
    """`count` target layer ids spread from layer 1 to the last layer (all layers if fewer)."""
    if num_target_layers <= count:
        return list(range(num_target_layers))
    first, last = 1, num_target_layers - 1
    return sorted({round(first + i * (last - first) / (count - 1)) for i in range(count)})


def drafter_config(cfg: DrafterTrainConfig, target: ModelConfig, mask_id: int) -> DrafterConfig:
    """Qwen3-style layers as wide as the target; heads like the target's."""
    return DrafterConfig(
        family="qwen3",
        vocab_size=target.vocab_size,
        hidden_size=target.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=target.num_attention_heads,
        num_key_value_heads=target.num_key_value_heads,
        head_dim=target.head_dim,
        rms_norm_eps=target.rms_norm_eps,
        rope_theta=target.rope_theta,
        max_position_embeddings=target.max_position_embeddings,
        eos_token_id=target.eos_token_id,
        block_size=cfg.block_size,
        target_layer_ids=spread_layer_ids(target.num_hidden_layers),
        mask_token_id=mask_id,
        num_target_layers=target.num_hidden_layers,
    )


def make_blocks(
    examples: list[Example], anchors: int, block: int, mask_id: int, rng: random.Random
) -> dict[str, torch.Tensor]:
    """Right-padded sequences and random anchor blocks for one batch.

    ids [S, L], anchor [S, A] (a position per block), labels [S, A, block]
    (-100 where no loss: block position 0, past the sequence end, padding
    anchors) and block_ids [S, A, block] = [token at anchor, MASK, ...].
    """
    s, length = len(examples), max(len(e.ids) for e in examples)
    ids = torch.zeros(s, length, dtype=torch.long)
    anchor = torch.zeros(s, anchors, dtype=torch.long)
    labels = torch.full((s, anchors, block), -100, dtype=torch.long)
    for i, ex in enumerate(examples):
        ids[i, : len(ex.ids)] = torch.tensor(ex.ids)
        candidates = list(range(max(1, ex.prompt_len - 1), len(ex.ids) - 1))
        chosen = sorted(rng.sample(candidates, min(anchors, len(candidates))))
        for j, a in enumerate(chosen):
            anchor[i, j] = a
            span = ex.ids[a + 1 : a + block]  # targets for block positions 1..
            labels[i, j, 1 : 1 + len(span)] = torch.tensor(span)
    block_ids = torch.full((s, anchors, block), mask_id, dtype=torch.long)
    block_ids[:, :, 0] = ids.gather(1, anchor)
    return {"ids": ids, "anchor": anchor, "labels": labels, "block_ids": block_ids}


def block_mask(anchor: torch.Tensor, length: int, block: int) -> torch.Tensor:
    """bool [S, A*block, L + A*block]: context before the anchor, own block bidirectionally."""
    s, a = anchor.shape
    ctx = torch.arange(length)[None, None, :] < anchor[:, :, None]  # [S, A, L]
    ctx = ctx.repeat_interleave(block, dim=1)  # [S, A*block, L]
    owner = torch.arange(a).repeat_interleave(block)  # [A*block]
    own = (owner[:, None] == owner[None, :]).expand(s, -1, -1)  # [S, A*block, A*block]
    return torch.cat([ctx, own], dim=2)


def block_hidden(
    drafter: DFlashDrafter, target: Decoder, batch: dict[str, torch.Tensor]
) -> torch.Tensor:
    """Drafter outputs [S, A, block, H] for the batch's blocks (target frozen, no grad)."""
    ids, anchor, block_ids = batch["ids"], batch["anchor"], batch["block_ids"]
    s, a, blk = block_ids.shape
    with torch.no_grad():
        out = target(ids, hidden_layer_ids=drafter.cfg.target_layer_ids)
        feats = torch.cat(out.hidden, dim=-1)  # [S, L, layers*H]
        noise = target.embed(block_ids.view(s, a * blk))  # [S, A*block, H]
    q_pos = (anchor[:, :, None] + torch.arange(blk)).view(s, a * blk)
    c_pos = torch.arange(ids.shape[1]).expand(s, -1)
    mask = block_mask(anchor, ids.shape[1], blk)
    hidden = drafter(noise, feats, q_pos, c_pos, attn_mask=mask)  # [S, A*block, H]
    return hidden.view(s, a, blk, -1)


def block_loss(
    drafter: DFlashDrafter, target: Decoder, batch: dict[str, torch.Tensor], gamma: float
) -> tuple[torch.Tensor, float]:
    """Weighted block loss and the top-1 accuracy at block position 1."""
    labels = batch["labels"]  # [S, A, block]
    logits = target.lm_logits(block_hidden(drafter, target, batch))  # [S, A, block, V]
    blk = labels.shape[-1]
    weights = torch.exp(-(torch.arange(blk) - 1).clamp(min=0) / gamma)  # [block]
    ce = F.cross_entropy(
        logits.flatten(0, 2), labels.flatten(), ignore_index=-100, reduction="none"
    )
    w = (weights * (labels != -100)).flatten()
    loss = (ce * w).sum() / w.sum().clamp(min=1e-9)
    first = labels[:, :, 1] != -100
    acc = (logits[:, :, 1].argmax(-1) == labels[:, :, 1])[first].float().mean().item()
    return loss, acc


def load_frozen_target(target_dir: Path) -> tuple[Decoder, Tokenizer, int]:
    target = load_decoder(target_dir)
    for p in target.parameters():
        p.requires_grad_(False)
    tokenizer = Tokenizer.load(target_dir)
    mask_id = tokenizer.token_to_id(MASK_TOKEN)
    if mask_id is None:
        raise UserError(
            f"{target_dir}/tokenizer.json has no {MASK_TOKEN} token; "
            "train the tokenizer with `ddtune train tokenizer`"
        )
    return target, tokenizer, mask_id


def train_drafter(
    cfg: DrafterTrainConfig, resume: bool = False, stop_after: int | None = None
) -> dict[str, Any]:
    """Run the recipe; returns a summary (final loss, accuracy, seconds, parameter count).

    `stop_after` ends this run at that step with a checkpoint and no export.
    """
    torch.set_num_threads(cfg.threads)
    target, tokenizer, mask_id = load_frozen_target(Path(cfg.target_dir))
    dcfg = drafter_config(cfg, target.cfg, mask_id)
    torch.manual_seed(cfg.seed)
    drafter = DFlashDrafter(dcfg)
    init_weights(drafter)
    opt = Optimization(drafter, cfg)
    if resume:
        opt.resume()
    began = time.perf_counter()
    examples = distill_data(cfg, target, tokenizer)
    distill_seconds = time.perf_counter() - began
    end = opt.end(stop_after)
    loss, acc = _loop(drafter, target, opt, examples, cfg, end)
    seconds = opt.seconds
    if end < cfg.steps:
        return {"stopped_at": end, "final_loss": loss}
    save_drafter(drafter, dcfg, Path(cfg.out_dir))
    return opt.write_summary(
        {
            "final_loss": loss,
            "accuracy_at_1": acc,
            "train_seconds": round(seconds, 1),
            "distill_seconds": round(distill_seconds, 1),
            "examples": len(examples),
            "parameters": sum(p.numel() for p in drafter.parameters()),
            "config": asdict(cfg),
        }
    )


def _loop(
    drafter: DFlashDrafter,
    target: Decoder,
    opt: Optimization,
    examples: list[Example],
    cfg: DrafterTrainConfig,
    end: int,
) -> tuple[float, float]:
    """Steps up to `end`; batch i depends only on (seed, i), so a resume is exact."""
    loss_value, acc = math.nan, math.nan
    with TrainProgress(cfg.steps, opt.start, "drafter") as progress:
        for step, lr in opt.schedule(end):
            rng = random.Random(cfg.seed * 1_000_003 + step)  # this step's own seeded RNG
            chosen = rng.sample(examples, min(cfg.batch_size, len(examples)))
            batch = make_blocks(chosen, cfg.anchors, cfg.block_size, drafter.cfg.mask_token_id, rng)
            loss, acc = block_loss(drafter, target, batch, cfg.gamma)
            loss_value = opt.update(loss)
            progress.update(step + 1, loss_value, int(batch["ids"].numel()), lr)
            opt.checkpoint(step, end)
    return loss_value, acc
