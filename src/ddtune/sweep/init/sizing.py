"""How big the bench and the expected costs of a generated spec are, from the model itself.

    bench = bench_table(windows=[1024, 2048], context=131072)   # the [bench] table
    start_s = expected_start_s(Path("/models/Kimi"), tp=8)       # seconds, stop to READY
    block = drafter_block(Path("/models/Kimi-DFlash"))           # or None

The long-context prompts are longer than the largest finite window swept
(twice it, at least 4096 tokens, within the served context), so each window
can differ from "none"; the short ones are chat-sized. Coding is measured on
HumanEval (a seeded 20 of its 164 problems, their tests run in the sandbox):
ddtune's bundled coding tasks are written for its tiny demo models. A model folder that
cannot be read here (another machine's path) gives a start estimate from the
tensor-parallel width, said as such in the spec.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LONG_MIN_TOKENS = 4096
ANSWER_TOKENS = 256  # max_tokens of the throughput workloads
SHORT_PROMPT_TOKENS = 200  # a chat turn
CODING_TOKENS = 512  # max_tokens of a coding task
CONTEXT_MARGIN = 512  # tokens kept free of the served context (chat template, answer slack)
LOAD_GB_PER_S = 1.5  # GB of weights read and placed per second (548 GB: ~7 minutes)
START_OVERHEAD_S = 60.0  # process start, CUDA graphs, warmup
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
ASSUMED_TOKENS_PER_S = 60.0  # one stream of a large model, before anything is measured
HUMANEVAL_ITEMS = 20  # a seeded 20 of HumanEval's 164 problems a bench


def answer_tokens(context: int | None) -> int:
    """max_tokens of the throughput workloads: ANSWER_TOKENS, at most a quarter of the context."""
    return ANSWER_TOKENS if context is None else max(1, min(ANSWER_TOKENS, context // 4))


def long_prompt_tokens(windows: list[int], context: int | None) -> int:
    """Twice the largest finite window (at least LONG_MIN_TOKENS), within the context (less
    the answer and a margin for the chat template)."""
    tokens = max([LONG_MIN_TOKENS, *(2 * w for w in windows)])
    if context is not None:
        margin = min(CONTEXT_MARGIN, context // 8)
        tokens = min(tokens, context - answer_tokens(context) - margin)
    return max(tokens, 1)


def bench_table(windows: list[int], context: int | None) -> dict[str, Any]:
    """The [bench] table: short chat-sized prompts, long ones past every window, and coding
    on HumanEval (a seeded subset; the bundled coding tasks are for the demo models)."""
    answer = answer_tokens(context)
    coding = CODING_TOKENS if context is None else max(1, min(CODING_TOKENS, context // 4))
    short = SHORT_PROMPT_TOKENS if context is None else min(SHORT_PROMPT_TOKENS, context // 4)
    return {
        "temperature": 0,
        "warmup": 2,
        "concurrency": 1,
        "chars_per_token": 3.5,
        "request_timeout_s": 600,
        "short": {
            "n_prompts": 8,
            "prompt_tokens": max(short, 1),
            "max_tokens": answer,
            "repeats": 1,
        },
        "long": {
            "n_prompts": 2,
            "prompt_tokens": long_prompt_tokens(windows, context),
            "max_tokens": answer,
            "repeats": 1,
        },
        "suite": ["bundled", "humaneval"],
        "coding": {"enabled": False},
        "suites": {"humaneval": {"limit": HUMANEVAL_ITEMS, "max_tokens": coding}},
    }


def expected_bench_s(bench: dict[str, Any]) -> float:
    """One bench at ASSUMED_TOKENS_PER_S (the store's measurements replace it)."""
    tokens = sum(
        bench[w]["n_prompts"] * bench[w]["max_tokens"] * bench[w]["repeats"]
        for w in ("short", "long")
    )
    humaneval = bench["suites"]["humaneval"]
    tokens += humaneval["limit"] * humaneval["max_tokens"]
    return round(tokens / ASSUMED_TOKENS_PER_S)


def weights_gb(model: Path) -> float | None:
    """The size of the model folder's weight files in GB, or None where it cannot be read."""
    try:
        sizes = [p.stat().st_size for p in model.iterdir() if p.suffix in WEIGHT_SUFFIXES]
    except OSError:
        return None
    return sum(sizes) / 1e9 if sizes else None


def expected_start_s(model: Path, tp: int) -> tuple[float, str]:
    """(seconds from stop to READY, how that was estimated)."""
    size = weights_gb(model)
    if size is not None:
        seconds = START_OVERHEAD_S + size / LOAD_GB_PER_S
        return round(seconds), f"{size:.1f} GB of weights at {LOAD_GB_PER_S} GB/s + 60 s"
    guess = 480.0 if tp >= 4 else 120.0
    return guess, f"a guess for tp {tp} (the model folder cannot be read here)"


def drafter_block(drafter: Path | None) -> int | None:
    """The DFlash drafter's `block_size` from its config.json, or None."""
    block = _config_value(drafter, "block_size") if drafter is not None else None
    return block if isinstance(block, int) and block > 1 else None


def context_of(model: Path, given: int | None) -> int | None:
    """The served context: the command's own flag, else the model's max_position_embeddings."""
    if given is not None:
        return given
    value = _config_value(model, "max_position_embeddings")
    return value if isinstance(value, int) and value > 0 else None


def _config_value(folder: Path, key: str) -> Any:
    """One value of a model folder's config.json; None where it is absent or unreadable."""
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return config.get(key) if isinstance(config, dict) else None


__all__ = [
    "bench_table",
    "context_of",
    "drafter_block",
    "expected_bench_s",
    "expected_start_s",
    "long_prompt_tokens",
]
