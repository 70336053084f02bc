"""In-process engine speed (`ddtune bench-engine`): AR vs DFlash vs DDTree budgets, same prompts.

Not the HTTP benchmark of `ddtune.bench`. For every `DecodeParams` the same
prompts run with the same `SamplingParams` (T=0 from the CLI) after a warmup;
a row reports tokens/s, mean acceptance length (tau), the share of round time
spent outside the model forwards (tree build + mask + commit) and whether the
output equals AR token for token. See docs/ddtree.md "Engine".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ddtune.ddtree.engine import Engine, GenerationResult
from ddtune.params import DecodeParams, SamplingParams

WARMUP_TOKENS = 8

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
class SpeedRow:
    params: DecodeParams
    tokens: int
    seconds: float
    tokens_per_second: float
    tau: float  # mean acceptance length (bonus included); 1 for AR
    overhead_share: float  # (tree + commit) / round time
    draft_share: float
    verify_share: float
    lossless: bool  # output token ids equal AR's

    @property
    def label(self) -> str:
        return self.params.label()

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the label, the parameters in wire form, then the figures."""
        figures = {k: v for k, v in asdict(self).items() if k != "params"}
        return {"label": self.label, **self.params.to_wire(), **figures}


def plan(
    budgets: Sequence[int], topk: int, window: int | None, with_drafter: bool
) -> list[DecodeParams]:
    """AR, then (with a drafter) DFlash and DDTree at every budget; `UserError` on bad values."""
    configs = [DecodeParams("ar").canonical()]
    if with_drafter:
        wire = [{"mode": "dflash", "budget": 0, "topk": 1, "window": window}]
        wire += [{"mode": "ddtree", "budget": b, "topk": topk, "window": window} for b in budgets]
        configs += [DecodeParams.from_wire(w, "bench-engine") for w in wire]
    return configs


def run_engine_bench(
    engine: Engine,
    prompts: Sequence[str],
    configs: Sequence[DecodeParams],
    sampling: SamplingParams,
    on_progress: Callable[[str], None] | None = None,
    repeats: int = 1,
) -> list[SpeedRow]:
    """One row per config; each runs every prompt `repeats` times (totals over all runs).

    `lossless` compares every row's output with the first row's (AR), which
    means something at temperature 0 only.
    """
    prompt_ids = [engine.tokenizer.encode(p) for p in prompts] * repeats
    warmup = sampling.replace(max_new_tokens=WARMUP_TOKENS)
    rows: list[SpeedRow] = []
    reference: list[list[int]] | None = None
    for params in configs:
        engine.generate(prompt_ids[0], params, warmup)
        results = [engine.generate(ids, params, sampling) for ids in prompt_ids]
        outputs = [r.token_ids for r in results]
        reference = outputs if reference is None else reference
        rows.append(_row(params, results, outputs == reference))
        if on_progress is not None:
            on_progress(params.label())
    return rows


def _row(params: DecodeParams, results: list[GenerationResult], lossless: bool) -> SpeedRow:
    tokens = sum(len(r.token_ids) for r in results)
    seconds = sum(r.stats.total_seconds for r in results)
    rounds = sum(r.stats.rounds for r in results)
    accepted = sum(sum(r.stats.acceptance_lengths) for r in results)
    stages = {
        k: sum(r.stats.stage_seconds[k] for r in results) for k in results[0].stats.stage_seconds
    }
    round_time = sum(stages.values()) or 1.0
    return SpeedRow(
        params=params,
        tokens=tokens,
        seconds=seconds,
        tokens_per_second=tokens / seconds if seconds else 0.0,
        tau=accepted / rounds if rounds else 0.0,
        overhead_share=(stages["tree"] + stages["commit"]) / round_time,
        draft_share=stages["draft"] / round_time,
        verify_share=stages["verify"] / round_time,
        lossless=lossless,
    )
