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
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

from ddtune.engine.config import ModelConfig
from ddtune.engine.loading import load_decoder, save_decoder
from ddtune.engine.model import Decoder
from ddtune.errors import UserError
from ddtune.train.common import TrainProgress, cosine_lr, load_checkpoint, save_checkpoint
from ddtune.train.corpus import iter_documents
from ddtune.train.tokenizer import EOS_TOKEN, load_tokenizer, special_id

# Settings that change the result; the rest (folders, threads) may differ on resume.
RUN_KEYS = (
    "seed",
    "hidden_size",
    "num_layers",
    "num_heads",
    "num_kv_heads",
    "intermediate_size",
    "max_context",
    "seq_len",
    "batch_size",
    "lr",
    "warmup",
    "weight_decay",
    "task_share",
    "steps",
    "init_from",
)


@dataclass
class TargetTrainConfig:
    tokenizer_dir: str
    out_dir: str
    checkpoint_dir: str
    seed: int = 0
    hidden_size: int = 256
    num_layers: int = 6
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 768
    max_context: int = 512
    seq_len: int = 512
    batch_size: int = 8
    steps: int = 1000
    lr: float = 2e-3
    warmup: int = 50
    weight_decay: float = 0.1
    task_share: float = 0.7
    checkpoint_every: int = 50
    threads: int = 2
    init_from: str | None = None  # a trained target folder to continue from (a second stage)

    def __post_init__(self) -> None:
        for name in (
            "hidden_size",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "seq_len",
            "batch_size",
            "steps",
            "checkpoint_every",
            "threads",
        ):
            if getattr(self, name) < 1:
                raise UserError(f"{name} must be at least 1; got {getattr(self, name)}")
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise UserError("hidden_size must divide by num_heads, and num_heads by num_kv_heads")
        if self.seq_len > self.max_context:
            raise UserError(f"seq_len {self.seq_len} exceeds max_context {self.max_context}")
        if self.lr <= 0:
            raise UserError(f"lr must be positive; got {self.lr}")

    def run_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in RUN_KEYS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TargetTrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UserError(f"unknown target training setting(s): {', '.join(unknown)}")
        return cls(**data)


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
            if getattr(module, "bias", None) is not None:
                torch.nn.init.zeros_(module.bias)


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
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay
    )
    start, elapsed = 0, 0.0
    if resume:
        state = load_checkpoint(Path(cfg.checkpoint_dir), cfg.run_dict())
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start, elapsed = state["step"], state.get("seconds", 0.0)
    per_step = cfg.batch_size * (cfg.seq_len + 1)
    stream = token_stream(tokenizer, cfg.seed, cfg.task_share, cfg.steps * per_step)
    end = cfg.steps if stop_after is None else min(cfg.steps, stop_after)
    loss, seconds = _loop(model, optimizer, stream, cfg, start, end, elapsed)
    if end < cfg.steps:
        return {"stopped_at": end, "final_loss": loss}
    save_target(model, mcfg, Path(cfg.tokenizer_dir), Path(cfg.out_dir))
    params = sum(p.numel() for p in model.parameters())
    summary = {
        "final_loss": loss,
        "tokens": cfg.steps * cfg.batch_size * cfg.seq_len,
        "seconds": round(seconds, 1),
        "parameters": params,
        "config": asdict(cfg),
    }
    (Path(cfg.checkpoint_dir) / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _loop(
    model: Decoder,
    optimizer: torch.optim.Optimizer,
    stream: torch.Tensor,
    cfg: TargetTrainConfig,
    start: int,
    end: int,
    elapsed: float,
) -> tuple[float, float]:
    """Steps `start..end`; returns (last loss, total training seconds incl. earlier runs)."""
    model.train()
    per_step, loss_value = cfg.batch_size * (cfg.seq_len + 1), float("nan")
    began = time.perf_counter()
    with TrainProgress(cfg.steps, start, "target") as progress:
        for step in range(start, end):
            # 1. learning rate for this step
            lr = cosine_lr(step, cfg.steps, cfg.lr, cfg.warmup)
            for group in optimizer.param_groups:
                group["lr"] = lr
            # 2. the step's slice of the stream: inputs and next-token labels [B, T]
            batch = stream[step * per_step : (step + 1) * per_step].view(cfg.batch_size, -1)
            logits = model(batch[:, :-1]).logits  # [B, T, V]
            loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
            # 3. update
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            loss_value = loss.item()
            progress.update(step + 1, loss_value, cfg.batch_size * cfg.seq_len, lr)
            # 4. checkpoint
            if (step + 1) % cfg.checkpoint_every == 0 or step + 1 == end:
                seconds = elapsed + time.perf_counter() - began
                save_checkpoint(
                    Path(cfg.checkpoint_dir),
                    {
                        "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "step": step + 1,
                        "config": cfg.run_dict(),
                        "seconds": seconds,
                        "loss": loss_value,
                    },
                )
    return loss_value, elapsed + time.perf_counter() - began
