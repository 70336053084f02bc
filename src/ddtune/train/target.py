"""Train the target: a small Qwen3-architecture code LM, saved in Hugging Face format.

The model is the engine's own `Decoder`, so what we train is exactly what the
engine serves. Recipe:

1. Pack the mixed corpus (tasks + stdlib, see `corpus.py`) into one token
   stream, EOS between documents; batch i is the i-th slice of it, so the data
   order depends only on the seed and a resumed run sees the same batches.
2. AdamW, linear warmup then cosine decay, gradient clipping at 1.0.
3. Every `checkpoint_every` steps: model + optimizer + step to `checkpoint.pt`.
4. At the end: `config.json`, `model.safetensors`, `generation_config.json`,
   `tokenizer.json`, `tokenizer_config.json` in the output folder.

See docs/ddtree.md "Train".
"""

from __future__ import annotations

import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

from ddtune.ddtree.models.config import ModelConfig
from ddtune.ddtree.models.loading import load_decoder, save_decoder
from ddtune.ddtree.models.model import Decoder
from ddtune.errors import UserError
from ddtune.train.common import Optimization, TrainProgress
from ddtune.train.configs import TargetTrainConfig
from ddtune.train.corpus import iter_documents
from ddtune.train.tokenizer import EOS_TOKEN, load_tokenizer, special_id


def model_config(cfg: TargetTrainConfig, tokenizer: Tokenizer) -> ModelConfig:
    eos = special_id(tokenizer, EOS_TOKEN)
    return ModelConfig(
        family="qwen3",
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.hidden_size // cfg.num_heads,
        max_position_embeddings=cfg.max_context,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        eos_token_id=eos,
        bos_token_id=eos,
    )


def init_weights(model: torch.nn.Module, std: float = 0.02) -> None:
    """Normal(0, std) for linear and embedding weights, zero biases; norms stay at one."""
    for module in model.modules():
        if isinstance(module, torch.nn.Linear | torch.nn.Embedding):
            torch.nn.init.normal_(module.weight, std=std)
            bias = getattr(module, "bias", None)
            if isinstance(bias, torch.Tensor):
                torch.nn.init.zeros_(bias)


def token_stream(tokenizer: Tokenizer, seed: int, task_share: float, n_tokens: int) -> torch.Tensor:
    """The first `n_tokens` of the packed corpus [n_tokens] (int64), EOS after every document."""
    eos = special_id(tokenizer, EOS_TOKEN)
    documents = iter_documents(seed, task_share)
    ids: list[int] = []
    while len(ids) < n_tokens:
        batch = [next(documents) for _ in range(256)]
        pieces = [piece for doc in batch for piece in doc]
        encoded = iter(tokenizer.encode_batch(pieces))
        for doc in batch:
            for _ in doc:
                ids.extend(next(encoded).ids)
            ids.append(eos)
    return torch.tensor(ids[:n_tokens], dtype=torch.long)


def save_target(model: Decoder, mcfg: ModelConfig, tokenizer_dir: Path, out_dir: Path) -> Path:
    """The Hugging Face folder: weights, configs and both tokenizer files."""
    gen = {"eos_token_id": mcfg.eos_token_id, "bos_token_id": mcfg.bos_token_id, "do_sample": False}
    save_decoder(model, mcfg, out_dir, tokenizer_dir / "tokenizer.json", gen)
    shutil.copyfile(tokenizer_dir / "tokenizer_config.json", out_dir / "tokenizer_config.json")
    return out_dir


def _load_initial(model: Decoder, mcfg: ModelConfig, folder: Path) -> None:
    """Start from a trained folder's weights; its architecture must equal this run's."""
    start = load_decoder(folder)
    if start.cfg != mcfg:
        diff = sorted(k for k in vars(mcfg) if getattr(mcfg, k) != getattr(start.cfg, k))
        raise UserError(
            f"--init-from {folder}: its config differs from this run's in {', '.join(diff)}"
        )
    model.load_state_dict(start.state_dict())


def train_target(
    cfg: TargetTrainConfig, resume: bool = False, stop_after: int | None = None
) -> dict[str, Any]:
    """Run the recipe; returns a summary (final loss, tokens, seconds, parameter count).

    `stop_after` ends this run at that step with a checkpoint and no export (a
    time-sliced run; continue it with `resume=True`).
    """
    torch.set_num_threads(cfg.threads)
    tokenizer = load_tokenizer(Path(cfg.tokenizer_dir))
    mcfg = model_config(cfg, tokenizer)
    torch.manual_seed(cfg.seed)
    model = Decoder(mcfg)
    init_weights(model)
    if cfg.init_from:
        _load_initial(model, mcfg, Path(cfg.init_from))
    opt = Optimization(model, cfg, weight_decay=cfg.weight_decay)
    if resume:
        opt.resume()
    per_step = cfg.batch_size * (cfg.seq_len + 1)
    stream = token_stream(tokenizer, cfg.seed, cfg.task_share, cfg.steps * per_step)
    end = opt.end(stop_after)
    loss = _loop(model, opt, stream, cfg, end)
    seconds = opt.seconds
    if end < cfg.steps:
        return {"stopped_at": end, "final_loss": loss}
    save_target(model, mcfg, Path(cfg.tokenizer_dir), Path(cfg.out_dir))
    return opt.write_summary(
        {
            "final_loss": loss,
            "tokens": cfg.steps * cfg.batch_size * cfg.seq_len,
            "seconds": round(seconds, 1),
            "parameters": sum(p.numel() for p in model.parameters()),
            "config": asdict(cfg),
        }
    )


def _loop(
    model: Decoder, opt: Optimization, stream: torch.Tensor, cfg: TargetTrainConfig, end: int
) -> float:
    """Steps up to `end`: batch i is the i-th slice of the stream. Returns the last loss."""
    per_step, loss_value = cfg.batch_size * (cfg.seq_len + 1), float("nan")
    with TrainProgress(cfg.steps, opt.start, "target") as progress:
        for step, lr in opt.schedule(end):
            # inputs and next-token labels [B, T]
            batch = stream[step * per_step : (step + 1) * per_step].view(cfg.batch_size, -1)
            logits = model(batch[:, :-1]).logits  # [B, T, V]
            loss_value = opt.update(F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten()))
            progress.update(step + 1, loss_value, cfg.batch_size * cfg.seq_len, lr)
            opt.checkpoint(step, end, loss=loss_value)
    return loss_value
