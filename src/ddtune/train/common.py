"""Helpers shared by the target and drafter trainers.

- `cosine_lr`: linear warmup, then cosine decay to a floor.
- `save_checkpoint` / `load_checkpoint`: atomic `checkpoint.pt` with model,
  optimizer, step and the run's config, so an interrupted run resumes exactly.
- `Optimization`: one model's AdamW steps: resume, the learning rate of each
  step, the clipped update, checkpoints every `checkpoint_every` steps.
- `TrainProgress`: a rich progress bar with loss and tokens/s on a terminal,
  plain log lines otherwise (for `nohup` runs).

See docs/ddtree.md "Train".
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ddtune.errors import UserError

CHECKPOINT_NAME = "checkpoint.pt"


def cosine_lr(step: int, total: int, peak: float, warmup: int, floor_ratio: float = 0.1) -> float:
    """Learning rate at `step` (0-based): warmup to `peak`, cosine down to `peak * floor_ratio`."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (floor_ratio + (1 - floor_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def save_checkpoint(folder: Path, state: dict[str, Any]) -> Path:
    """Write `checkpoint.pt` atomically (temp file + rename): a kill never leaves half a file."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / CHECKPOINT_NAME
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(folder: Path, config: dict[str, Any]) -> dict[str, Any]:
    """The saved state; a clear error if it is missing or was made with another config."""
    path = Path(folder) / CHECKPOINT_NAME
    if not path.is_file():
        raise UserError(f"--resume: no {CHECKPOINT_NAME} in {folder}; start without --resume")
    state = torch.load(path, map_location="cpu", weights_only=False)
    saved = state.get("config", {})
    changed = sorted(k for k in set(saved) | set(config) if saved.get(k) != config.get(k))
    if changed:
        raise UserError(
            f"--resume: the checkpoint in {folder} was made with different settings "
            f"({', '.join(changed)}); use the same arguments or start a new --checkpoint-dir"
        )
    return state


class Schedule(Protocol):
    """What `Optimization` reads from a training config."""

    @property
    def checkpoint_dir(self) -> str: ...
    @property
    def steps(self) -> int: ...
    @property
    def lr(self) -> float: ...
    @property
    def warmup(self) -> int: ...
    @property
    def checkpoint_every(self) -> int: ...
    def run_dict(self) -> dict[str, Any]: ...


class Optimization:
    """AdamW (betas 0.9, 0.95) over `model`, stepped on the cosine schedule of `cfg`."""

    def __init__(self, model: torch.nn.Module, cfg: Schedule, weight_decay: float = 0.0) -> None:
        self.model, self.cfg = model, cfg
        self.optimizer = torch.optim.AdamW(
            model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=weight_decay
        )
        self.start, self.elapsed, self.began = 0, 0.0, time.perf_counter()
        self.folder = Path(cfg.checkpoint_dir)

    def resume(self) -> None:
        """Continue from the checkpoint (it must have been made with the same run settings)."""
        state = load_checkpoint(self.folder, self.cfg.run_dict())
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.start, self.elapsed = state["step"], state.get("seconds", 0.0)

    def end(self, stop_after: int | None) -> int:
        """The step this run stops at: the last one, or `stop_after` for a time-sliced run."""
        return self.cfg.steps if stop_after is None else min(self.cfg.steps, stop_after)

    def schedule(self, end: int) -> Iterator[tuple[int, float]]:
        """(step, learning rate) for steps start..end-1, the rate already set; starts the clock."""
        self.model.train()
        self.began = time.perf_counter()
        for step in range(self.start, end):
            lr = cosine_lr(step, self.cfg.steps, self.cfg.lr, self.cfg.warmup)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            yield step, lr

    def update(self, loss: torch.Tensor) -> float:
        """Backward, clip the gradient norm at 1.0, step; returns the loss value."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        return loss.item()

    @property
    def seconds(self) -> float:
        """Training seconds, earlier runs of a resumed training included."""
        return self.elapsed + time.perf_counter() - self.began

    def checkpoint(self, step: int, end: int, **extra: Any) -> None:
        """Save after `step` (0-based) when due: every `checkpoint_every` steps and at `end`."""
        done = step + 1
        if done % self.cfg.checkpoint_every and done != end:
            return
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "step": done,
            "config": self.cfg.run_dict(),
            "seconds": self.seconds,
        }
        save_checkpoint(self.folder, {**state, **extra})

    def write_summary(self, summary: dict[str, Any]) -> dict[str, Any]:
        (self.folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary


class TrainProgress:
    """Progress with loss and tokens/s: a live bar on a terminal, a log line every `every` steps otherwise."""

    def __init__(self, total: int, start: int, description: str, every: int = 20) -> None:
        self.console = Console(stderr=True)
        self.total, self.every, self.description = total, every, description
        self.started, self.tokens = time.perf_counter(), 0
        self.live = self.console.is_terminal
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]:.3f}"),
            TextColumn("{task.fields[tps]:.0f} tok/s"),
            TimeRemainingColumn(),
            console=self.console,
            disable=not self.live,
        )
        self.task = self.progress.add_task(
            description, total=total, completed=start, loss=0.0, tps=0.0
        )

    def __enter__(self) -> TrainProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def update(self, step: int, loss: float | None, tokens: int, lr: float) -> float:
        """Record progress `step` (1-based); loss None = no training figures. Returns tokens/s."""
        self.tokens += tokens
        elapsed = time.perf_counter() - self.started
        tps = self.tokens / max(1e-9, elapsed)
        self.progress.update(self.task, completed=step, loss=loss or 0.0, tps=tps)
        if self.live or not (step % self.every == 0 or step == self.total):
            return tps
        if loss is None:
            print(f"{self.description} {step}/{self.total} {elapsed:.0f}s", flush=True)
        else:
            print(
                f"{self.description} step {step}/{self.total} loss {loss:.4f} lr {lr:.2e} "
                f"{tps:.0f} tok/s {elapsed:.0f}s",
                flush=True,
            )
        return tps
