"""Train an EAGLE-3 head for a target on the target's own outputs, with the training-time test.

1. Data: the frozen target continues training prompts greedily (`distill.py`, as
   for the DFlash drafter), so the head learns to predict *this* target at T = 0.
2. Draft vocabulary (`draft_vocab.py`): the `draft_vocab` tokens the target
   writes most often; the head's LM head starts from the target's rows for them.
3. Each step takes a batch of those sequences; the target runs over them once
   (no gradient) and returns the hidden states of the aux layers (vLLM's ids: id
   j is the stream entering layer j, i.e. our decoder's output of layer j - 1).
4. The head unrolls `ttt_steps` draft steps at every position at once
   (`Eagle3Head.unroll`): step 0 reads the target's features, step k > 0 the
   head's own output of step k - 1, as it will when drafting (EAGLE-3's
   training-time test). Step k at anchor t predicts token t + 2 + k.
5. Loss: cross-entropy of each step against the target's greedy token there, on
   the generated part only, weighted `step_decay ** k`; a token the draft
   vocabulary lacks is skipped (no step can draft it). The target (embedding
   included) is frozen; AdamW, cosine schedule, clip 1.0 (`common.py`).
6. Export: `config.json` + `model.safetensors` in bfloat16 (`save_eagle3`), the
   layout vLLM (`LlamaForCausalLMEagle3`) and SGLang load.

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

from ddtune.ddtree.models.config import Eagle3Config, ModelConfig
from ddtune.ddtree.models.eagle3 import Eagle3Head
from ddtune.ddtree.models.loading import load_decoder, save_eagle3
from ddtune.ddtree.models.model import Decoder
from ddtune.ddtree.models.tokenizer import Tokenizer
from ddtune.errors import UserError
from ddtune.train.common import Optimization, TrainProgress
from ddtune.train.configs import Eagle3TrainConfig
from ddtune.train.distill import Example, distill_data
from ddtune.train.draft_vocab import DraftVocab, draft_vocabulary
from ddtune.train.target import init_weights


def aux_layer_ids(text: str, num_layers: int) -> list[int]:
    """vLLM's aux ids from '2,4,5' (empty: 2, n // 2 + 1, n - 1, within 1..n - 1).

    ddtune reads ids 1..n - 1 (the output of layers 0..n - 2); id n would be the last
    layer before the final norm, which our decoder does not return.
    """
    top = num_layers - 1
    if not text.strip():
        return [min(2, top), min(num_layers // 2 + 1, top), top]
    try:
        ids = [int(part) for part in text.split(",")]
    except ValueError:
        raise UserError(f"--aux-layers must be comma-separated integers; got {text!r}") from None
    if len(ids) != 3 or not all(1 <= i <= top for i in ids):
        raise UserError(
            f"--aux-layers needs three ids between 1 and {top} for a {num_layers}-layer "
            f"target (vLLM's ids: j is the stream entering layer j); got {text!r}"
        )
    return ids


def head_config(
    cfg: Eagle3TrainConfig, target: ModelConfig, layer_ids: list[int], draft_vocab: int
) -> Eagle3Config:
    """One Llama layer as wide as the target, with its heads, RoPE and context."""
    return Eagle3Config(
        family="llama",
        vocab_size=target.vocab_size,
        hidden_size=target.hidden_size,
        intermediate_size=cfg.intermediate_size or target.intermediate_size,
        num_hidden_layers=1,
        num_attention_heads=target.num_attention_heads,
        num_key_value_heads=target.num_key_value_heads,
        head_dim=target.head_dim,
        rms_norm_eps=target.rms_norm_eps,
        rope_theta=target.rope_theta,
        rope_scaling=target.rope_scaling,
        max_position_embeddings=target.max_position_embeddings,
        bos_token_id=target.bos_token_id,
        eos_token_id=target.eos_token_id,
        draft_vocab_size=draft_vocab,
        aux_layer_ids=layer_ids,
    )


def make_batch(
    examples: list[Example], draft_index: torch.Tensor, steps: int
) -> dict[str, torch.Tensor]:
    """Right-padded ids [S, L] and labels [steps, S, L]: step k at anchor t is labelled
    with the draft id of token t + 2 + k, -100 where there is none to learn (the
    prompt, past the end, outside the draft vocabulary)."""
    s, length = len(examples), max(len(e.ids) for e in examples)
    ids = torch.zeros(s, length, dtype=torch.long)
    labels = torch.full((steps, s, length), -100, dtype=torch.long)
    for i, ex in enumerate(examples):
        ids[i, : len(ex.ids)] = torch.tensor(ex.ids)
        for k in range(steps):
            first = max(ex.prompt_len, 2 + k)  # label positions: generated, reachable
            if first >= len(ex.ids):
                continue
            wanted = draft_index[ids[i, first : len(ex.ids)]]
            labels[k, i, first - 2 - k : len(ex.ids) - 2 - k] = wanted
    return {"ids": ids, "labels": labels.masked_fill(labels < 0, -100)}


def target_features(target: Decoder, ids: torch.Tensor, layer_ids: list[int]) -> torch.Tensor:
    """The target's aux hidden states [S, L, 3H] at vLLM's ids (no gradient)."""
    top = target.cfg.num_hidden_layers - 1
    if not all(1 <= j <= top for j in layer_ids):
        raise UserError(
            f"aux layer ids {layer_ids}: ddtune reads ids 1..{top} of this target (the output "
            "of a layer before the last); train the head with such ids"
        )
    with torch.no_grad():
        out = target(ids, hidden_layer_ids=[j - 1 for j in layer_ids], logits=False)
    return torch.cat(out.hidden, dim=-1)


def head_loss(
    head: Eagle3Head, target: Decoder, batch: dict[str, torch.Tensor], decay: float
) -> tuple[torch.Tensor, list[float]]:
    """The weighted loss over the unrolled steps and each step's top-1 accuracy."""
    ids, labels = batch["ids"], batch["labels"]
    features = target_features(target, ids, head.cfg.layer_ids(target.cfg.num_hidden_layers))
    steps = labels.shape[0]
    logits = head.unroll(target.embed, ids, features, steps)
    loss = torch.zeros(())
    accuracy = []
    for k, step_logits in enumerate(logits):
        ce = F.cross_entropy(step_logits.flatten(0, 1), labels[k].flatten(), ignore_index=-100)
        loss = loss + decay**k * ce
        valid = labels[k] != -100
        hits = (step_logits.argmax(-1) == labels[k])[valid]
        accuracy.append(hits.float().mean().item() if hits.numel() else math.nan)
    return loss / sum(decay**k for k in range(steps)), accuracy


def new_head(
    cfg: Eagle3TrainConfig, target: Decoder, examples: list[Example]
) -> tuple[Eagle3Head, DraftVocab]:
    """The head at its initial weights, its vocabulary chosen and its LM head the target's."""
    layer_ids = aux_layer_ids(cfg.aux_layers, target.cfg.num_hidden_layers)
    size = min(cfg.draft_vocab, target.cfg.vocab_size)
    vocab = draft_vocabulary(examples, size, target.cfg.vocab_size)
    torch.manual_seed(cfg.seed)
    head = Eagle3Head(head_config(cfg, target.cfg, layer_ids, size))
    init_weights(head)
    head.set_vocabulary(vocab.ids)
    with torch.no_grad():
        head.lm_head.weight.copy_(target.lm_head.weight[vocab.ids])
    return head, vocab


def load_frozen(target_dir: Path) -> tuple[Decoder, Tokenizer]:
    target = load_decoder(target_dir)
    for p in target.parameters():
        p.requires_grad_(False)
    return target, Tokenizer.load(target_dir)


def train_eagle3(
    cfg: Eagle3TrainConfig, resume: bool = False, stop_after: int | None = None
) -> dict[str, Any]:
    """Run the recipe; returns a summary (loss, accuracy per step, seconds, size, coverage).

    `stop_after` ends this run at that step with a checkpoint and no export.
    """
    torch.set_num_threads(cfg.threads)
    target, tokenizer = load_frozen(Path(cfg.target_dir))
    began = time.perf_counter()
    examples = distill_data(cfg, target, tokenizer)
    distill_seconds = time.perf_counter() - began
    head, vocab = new_head(cfg, target, examples)
    opt = Optimization(head, cfg)
    if resume:
        opt.resume()
    end = opt.end(stop_after)
    loss, accuracy = _loop(head, target, opt, examples, cfg, end)
    if end < cfg.steps:
        return {"stopped_at": end, "final_loss": loss}
    folder = save_eagle3(head, head.cfg, Path(cfg.out_dir))
    return opt.write_summary(
        {
            "final_loss": loss,
            "accuracy_per_step": [round(a, 3) for a in accuracy],
            "train_seconds": round(opt.seconds, 1),
            "distill_seconds": round(distill_seconds, 1),
            "examples": len(examples),
            "parameters": sum(p.numel() for p in head.parameters()),
            "file_bytes": (folder / "model.safetensors").stat().st_size,
            "draft_vocab": vocab.size,
            "draft_vocab_coverage": round(vocab.coverage, 4),
            "aux_layer_ids": head.cfg.aux_layer_ids,
            "config": asdict(cfg),
        }
    )


def _loop(
    head: Eagle3Head,
    target: Decoder,
    opt: Optimization,
    examples: list[Example],
    cfg: Eagle3TrainConfig,
    end: int,
) -> tuple[float, list[float]]:
    """Steps up to `end`; batch i depends only on (seed, i), so a resume is exact."""
    loss_value, accuracy = math.nan, [math.nan] * cfg.ttt_steps
    index = head.draft_index()
    with TrainProgress(cfg.steps, opt.start, "eagle3") as progress:
        for step, lr in opt.schedule(end):
            rng = random.Random(cfg.seed * 1_000_003 + step)  # this step's own seeded RNG
            chosen = rng.sample(examples, min(cfg.batch_size, len(examples)))
            batch = make_batch(chosen, index, cfg.ttt_steps)
            loss, accuracy = head_loss(head, target, batch, cfg.step_decay)
            loss_value = opt.update(loss)
            progress.update(step + 1, loss_value, int(batch["ids"].numel()), lr)
            opt.checkpoint(step, end)
    return loss_value, accuracy
