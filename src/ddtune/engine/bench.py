"""`ddtune bench-engine`: AR vs DFlash vs DDTree (over budgets) on the same prompts, in-process.

For every configuration the same prompts run at T=0 after a warmup; a row
reports tokens/s, mean acceptance length (tau), the share of round time spent
outside the model forwards (tree build + mask + commit) and whether the
output equals AR token for token.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from ddtune.engine.engine import Engine, GenerationResult

FALLBACK_PROMPTS = [
    'def sum_even(xs: list[int]) -> int:\n    """Return the sum of the even numbers in xs."""\n',
    'def count_pos(xs: list[int]) -> int:\n    """Count the numbers greater than 0 in xs."""\n',
    'def rev_words(s: str) -> str:\n    """Reverse the order of the words in s."""\n',
    'def max_gap(xs: list[int]) -> int:\n    """Return the largest difference of neighbours in xs."""\n',
]


def default_prompts(count: int = 4) -> tuple[list[str], str]:
    """The first `count` bundled held-out task prompts, else built-in ones; and their source."""
    from ddtune.assets import TASKS_FILE

    if TASKS_FILE.is_file():
        lines = [ln for ln in TASKS_FILE.read_text().splitlines() if ln.strip()]
        prompts = [json.loads(ln)["prompt"] for ln in lines[:count]]
        if prompts:
            return prompts, f"the first {len(prompts)} held-out task prompts"
    return FALLBACK_PROMPTS[:count], "built-in prompts"


@dataclass
class BenchRow:
    label: str
    mode: str
    budget: int
    topk: int
    tokens: int
    seconds: float
    tokens_per_second: float
    tau: float  # mean acceptance length (bonus included); 1 for AR
    overhead_share: float  # (tree + commit) / round time
    draft_share: float
    verify_share: float
    lossless: bool  # output token ids equal AR's

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class BenchConfig:
    label: str
    mode: str
    budget: int = 0
    topk: int = 1


def plan(budgets: Sequence[int], topk: int, with_drafter: bool) -> list[BenchConfig]:
    configs = [BenchConfig("ar", "ar")]
    if with_drafter:
        configs.append(BenchConfig("dflash", "dflash"))
        configs += [BenchConfig(f"ddtree b{b} k{topk}", "ddtree", b, topk) for b in budgets]
    return configs


def run_engine_bench(
    engine: Engine,
    prompts: Sequence[str],
    configs: Sequence[BenchConfig],
    window: int | None = None,
    max_new_tokens: int = 64,
    on_progress: Callable[[str], None] | None = None,
    repeats: int = 1,
) -> list[BenchRow]:
    """One row per config; each runs every prompt `repeats` times (totals over all runs)."""
    prompt_ids = [engine.tokenizer.encode(p) for p in prompts] * repeats
    rows: list[BenchRow] = []
    reference: list[list[int]] | None = None
    for config in configs:
        _warmup(engine, prompt_ids[0], config, window)
        results = [_generate(engine, ids, config, window, max_new_tokens) for ids in prompt_ids]
        outputs = [r.token_ids for r in results]
        reference = outputs if reference is None else reference
        rows.append(_row(config, results, outputs == reference))
        if on_progress is not None:
            on_progress(config.label)
    return rows


def _generate(engine, ids, config: BenchConfig, window, max_new_tokens) -> GenerationResult:
    return engine.generate(
        ids,
        mode=config.mode,
        budget=config.budget,
        topk=config.topk,
        window=window,
        max_new_tokens=max_new_tokens,
        temperature=0.0,
        ignore_eos=True,
    )


def _warmup(engine, ids, config: BenchConfig, window) -> None:
    _generate(engine, ids, config, window, 8)


def _row(config: BenchConfig, results: list[GenerationResult], lossless: bool) -> BenchRow:
    tokens = sum(len(r.token_ids) for r in results)
    seconds = sum(r.stats.total_seconds for r in results)
    rounds = sum(r.stats.rounds for r in results)
    accepted = sum(sum(r.stats.acceptance_lengths) for r in results)
    stages = {
        k: sum(r.stats.stage_seconds[k] for r in results) for k in results[0].stats.stage_seconds
    }
    round_time = sum(stages.values()) or 1.0
    return BenchRow(
        label=config.label,
        mode=config.mode,
        budget=config.budget,
        topk=config.topk,
        tokens=tokens,
        seconds=seconds,
        tokens_per_second=tokens / seconds if seconds else 0.0,
        tau=accepted / rounds if rounds else 0.0,
        overhead_share=(stages["tree"] + stages["commit"]) / round_time,
        draft_share=stages["draft"] / round_time,
        verify_share=stages["verify"] / round_time,
        lossless=lossless,
    )
