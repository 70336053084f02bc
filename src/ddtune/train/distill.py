"""Self-distillation data for the drafter: what the trained target itself writes.

Prompts are training-split task prompts plus a few standard-library prefixes;
the target continues each one greedily (T=0), in left-padded batches with a
KV cache, until EOS or `max_new` tokens. Each example keeps the prompt length,
so the drafter trainer can put its anchors in the generated part.
`distill_data` makes (or reloads from the checkpoint folder) the examples of a
run: the DFlash drafter and the EAGLE-3 head train on the same kind of data.

See docs/ddtree.md "Train".
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from ddtune.ddtree.models.model import Decoder
from ddtune.ddtree.models.tokenizer import Tokenizer
from ddtune.train.common import TrainProgress
from ddtune.train.corpus import stdlib_chunks
from ddtune.train.tasks import iter_tasks
from ddtune.train.tokenizer import EOS_TOKEN, special_id

DATA_FILE = "distill.pt"


@dataclass
class Example:
    ids: list[int]  # prompt + generated tokens (EOS included when reached)
    prompt_len: int


def distill_prompts(
    tokenizer: Tokenizer, count: int, seed: int, stdlib_share: float = 0.2, max_prompt: int = 256
) -> list[list[int]]:
    """`count` prompt token lists: task prompts and stdlib chunk prefixes (16-160 tokens)."""
    rng = random.Random(seed)
    tasks = iter_tasks(seed + 1000, "train")
    chunks = stdlib_chunks("train", seed + 1000, max_chars=2_000_000)
    prompts = []
    for i in range(count):
        if rng.random() < stdlib_share:
            ids = tokenizer.encode(chunks[i % len(chunks)])[: rng.randint(16, 160)]
        else:
            ids = tokenizer.encode(next(tasks).prompt)
        prompts.append(ids[-max_prompt:])
    return prompts


@torch.no_grad()
def batch_greedy(
    model: Decoder, prompts: list[list[int]], max_new: int, eos: int, stop_at_eos: bool = True
) -> list[list[int]]:
    """Greedy continuations of left-padded `prompts`: cut after the first EOS, or, with
    `stop_at_eos=False`, `max_new` tokens of whatever the target writes past it."""
    b, width = len(prompts), max(len(p) for p in prompts)
    pad = torch.tensor([width - len(p) for p in prompts])  # [B]
    ids = torch.full((b, width), eos, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
    total = width + max_new
    valid = torch.arange(total)[None, :] >= pad[:, None]  # [B, S] real (non-pad) slots
    cache = model.new_cache(total, batch=b)
    # 1. prefill: causal over real slots; pad rows see themselves only (keeps values finite)
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    mask = (causal[None] & valid[:, None, :width]) | torch.eye(width, dtype=torch.bool)[None]
    positions = (torch.arange(width)[None, :] - pad[:, None]).clamp(min=0)  # [B, W]
    logits = model(
        ids, positions=positions, cache=cache, attn_mask=mask, last_logits_only=True
    ).logits
    out = torch.empty(b, 0, dtype=torch.long)
    done = torch.zeros(b, dtype=torch.bool)
    for step in range(max_new):
        # 2. pick, record, stop when every row has emitted EOS
        token = logits[:, -1].argmax(-1)  # [B]
        out = torch.cat([out, token[:, None]], dim=1)
        done |= token == eos
        if (stop_at_eos and bool(done.all())) or step + 1 == max_new:
            break
        # 3. one decode step for all rows
        pos = (width + step - pad)[:, None]  # [B, 1]
        step_mask = valid[:, None, : width + step + 1]  # [B, 1, S]
        logits = model(token[:, None], positions=pos, cache=cache, attn_mask=step_mask).logits
    rows = [row.tolist() for row in out]
    return [_cut_at_eos(row, eos) for row in rows] if stop_at_eos else rows


def _cut_at_eos(ids: list[int], eos: int) -> list[int]:
    return ids[: ids.index(eos) + 1] if eos in ids else ids


def build_examples(
    model: Decoder,
    prompts: list[list[int]],
    max_new: int,
    eos: int,
    batch: int = 32,
    on_batch: Callable[[int], None] | None = None,
    stop_at_eos: bool = True,
) -> list[Example]:
    """Examples for all prompts; batches group prompts of similar length to limit padding."""
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    examples: list[Example | None] = [None] * len(prompts)
    for start in range(0, len(order), batch):
        group = order[start : start + batch]
        continuations = batch_greedy(model, [prompts[i] for i in group], max_new, eos, stop_at_eos)
        for i, cont in zip(group, continuations, strict=True):
            examples[i] = Example(prompts[i] + cont, len(prompts[i]))
        if on_batch is not None:
            on_batch(len(group))
    return [e for e in examples if e is not None]


class DistillSettings(Protocol):
    """What `distill_data` reads from a training config."""

    @property
    def checkpoint_dir(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def prompts(self) -> int: ...
    @property
    def gen_tokens(self) -> int: ...
    @property
    def stop_at_eos(self) -> bool: ...


def distill_data(cfg: DistillSettings, target: Decoder, tokenizer: Tokenizer) -> list[Example]:
    """Generate (or reload from the checkpoint folder) the self-distillation examples."""
    path = Path(cfg.checkpoint_dir) / DATA_FILE
    key = {k: getattr(cfg, k) for k in ("seed", "prompts", "gen_tokens", "stop_at_eos")}
    if path.is_file():
        saved = torch.load(path, weights_only=False)
        if saved["key"] == key:
            return saved["examples"]
    eos = special_id(tokenizer.inner, EOS_TOKEN)
    prompts = distill_prompts(
        tokenizer,
        cfg.prompts,
        cfg.seed,
        max_prompt=target.cfg.max_position_embeddings - cfg.gen_tokens,
    )
    with TrainProgress(len(prompts), 0, "distill", every=256) as progress:
        done = [0]

        def tick(n: int) -> None:
            done[0] += n
            progress.update(done[0], None, 0, 0.0)

        examples = build_examples(
            target, prompts, cfg.gen_tokens, eos, on_batch=tick, stop_at_eos=cfg.stop_at_eos
        )
    Path(cfg.checkpoint_dir).mkdir(parents=True, exist_ok=True)
    torch.save({"key": key, "examples": examples}, path)
    return examples
