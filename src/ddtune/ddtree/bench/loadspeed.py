"""Aggregate speed under concurrency (`ddtune bench-engine --concurrency 1,2,4,8`).

For every concurrency c and every `DecodeParams`, the same prompts run
through the batch `Scheduler` with `max_batch = c`, all queued at once, so
c requests decode together until the queue runs dry (closed loop). A row
reports the aggregate output tok/s (all tokens / wall time) and tokens per
CPU-second of this process (with one torch thread that is what the wall
speed would be on an idle core: the figure to use on a shared machine), tau, the mean
batch size per round, the share of round time outside the model forwards
(tree build + mask + commit) and whether every output equals AR's at
concurrency 1. Repeats interleave concurrencies and configs, so machine
noise spreads over all rows; totals are over all repeats.
`summarize` picks, per concurrency, AR and the best speculative config
and the crossover where that advantage falls to 1 or below. See
docs/ddtree.md "Engine".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ddtune.ddtree.batch.budget import DEFAULT_MAX_STEP_TOKENS
from ddtune.ddtree.batch.rounds import RoundReport
from ddtune.ddtree.batch.scheduler import BatchRequest, BatchResult, Scheduler
from ddtune.ddtree.engine import Engine
from ddtune.params import DecodeParams, SamplingParams


@dataclass
class LoadRow:
    params: DecodeParams
    concurrency: int
    tokens: int = 0
    seconds: float = 0.0  # wall
    cpu_seconds: float = 0.0  # this process's CPU time over the same runs
    rounds: int = 0
    accepted: int = 0  # tokens committed by rounds (bonus included), over all requests
    request_rounds: int = 0  # rounds summed over requests (for tau)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    lossless: bool = True

    @property
    def label(self) -> str:
        return self.params.label()

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    @property
    def tokens_per_cpu_second(self) -> float:
        """Tokens per CPU-second: with one torch thread, the wall speed of an idle core."""
        return self.tokens / self.cpu_seconds if self.cpu_seconds else 0.0

    @property
    def tau(self) -> float:
        return self.accepted / self.request_rounds if self.request_rounds else 0.0

    @property
    def mean_batch(self) -> float:
        return self.request_rounds / self.rounds if self.rounds else 0.0

    @property
    def overhead_share(self) -> float:
        """(tree + mask + commit) / round time."""
        total = sum(self.stage_seconds.values()) or 1.0
        return (self.stage_seconds.get("tree", 0.0) + self.stage_seconds.get("commit", 0.0)) / total

    def to_dict(self) -> dict[str, Any]:
        figures = {k: v for k, v in asdict(self).items() if k != "params"}
        derived = (
            "tokens_per_second",
            "tokens_per_cpu_second",
            "tau",
            "mean_batch",
            "overhead_share",
        )
        return {
            "label": self.label,
            **self.params.to_wire(),
            **figures,
            **{k: getattr(self, k) for k in derived},
        }


def run_concurrency_bench(
    engine: Engine,
    prompts: Sequence[str],
    configs: Sequence[DecodeParams],
    sampling: SamplingParams,
    concurrencies: Sequence[int],
    repeats: int = 1,
    max_step_tokens: int = DEFAULT_MAX_STEP_TOKENS,
    on_progress: Callable[[str], None] | None = None,
) -> list[LoadRow]:
    """One row per (concurrency, config), in that order; `configs[0]` should be AR."""
    ids = [engine.tokenizer.encode(p) for p in prompts]
    rows = {(c, p): LoadRow(p, c) for c in concurrencies for p in configs}
    warm = sampling.replace(max_new_tokens=4)
    for params in configs:
        _run(engine, ids[:2], params, warm, 2, max_step_tokens, LoadRow(params, 2))
    reference: list[list[int]] | None = None
    for _ in range(repeats):
        for c in concurrencies:
            for params in configs:
                row = rows[(c, params)]
                outputs = _run(engine, ids, params, sampling, c, max_step_tokens, row)
                reference = outputs if reference is None else reference
                row.lossless = row.lossless and outputs == reference
                if on_progress is not None:
                    on_progress(f"c{c} {params.label()}")
    return list(rows.values())


def _run(
    engine: Engine,
    ids: list[list[int]],
    params: DecodeParams,
    sampling: SamplingParams,
    concurrency: int,
    max_step_tokens: int,
    row: LoadRow,
) -> list[list[int]]:
    """All prompts through one scheduler of `max_batch = concurrency`; adds to `row`."""
    scheduler = Scheduler(engine, concurrency, max_step_tokens)
    reports: list[RoundReport] = []
    scheduler.on_round = reports.append
    done: dict[int, BatchResult] = {}
    queue = list(enumerate(ids))
    start, cpu = time.perf_counter(), time.process_time()
    while queue or scheduler.busy:
        while queue and scheduler.can_admit(params):
            index, prompt = queue.pop(0)
            scheduler.add(BatchRequest(prompt, params, sampling, on_done=_store(done, index)))
        scheduler.step()
    row.seconds += time.perf_counter() - start
    row.cpu_seconds += time.process_time() - cpu
    results = [done[i].result for i in range(len(ids))]
    assert all(r is not None for r in results), "a benchmark request failed"
    row.rounds += len(reports)
    for report in reports:
        for stage, seconds in report.seconds.items():
            row.stage_seconds[stage] = row.stage_seconds.get(stage, 0.0) + seconds
    outputs = []
    for result in results:
        assert result is not None
        outputs.append(result.token_ids)
        row.tokens += len(result.token_ids)
        row.accepted += sum(result.stats.acceptance_lengths)
        row.request_rounds += result.stats.rounds
    return outputs


def _store(done: dict[int, BatchResult], index: int) -> Callable[[BatchResult], None]:
    def on_done(outcome: BatchResult) -> None:
        done[index] = outcome

    return on_done


def speed(row: LoadRow, clock: str) -> float:
    """tok/s by the "wall" clock or per CPU-second ("cpu")."""
    return row.tokens_per_cpu_second if clock == "cpu" else row.tokens_per_second


@dataclass
class ConcurrencySummary:
    concurrency: int
    ar: LoadRow
    best: LoadRow | None  # the fastest speculative config, None without one
    clock: str = "cpu"

    @property
    def advantage(self) -> float:
        """Best speculative tok/s over AR tok/s (0 without a speculative row)."""
        if self.best is None or not speed(self.ar, self.clock):
            return 0.0
        return speed(self.best, self.clock) / speed(self.ar, self.clock)


def summarize(rows: Sequence[LoadRow], clock: str = "cpu") -> list[ConcurrencySummary]:
    """Per concurrency: the AR row and the fastest speculative row by `clock`."""
    out = []
    for c in sorted({r.concurrency for r in rows}):
        at = [r for r in rows if r.concurrency == c]
        ar = next(r for r in at if r.params.mode == "ar")
        spec = [r for r in at if r.params.mode != "ar"]
        best = max(spec, key=lambda r: speed(r, clock)) if spec else None
        out.append(ConcurrencySummary(c, ar, best, clock))
    return out


def crossover(summaries: Sequence[ConcurrencySummary]) -> int | None:
    """The lowest concurrency where speculation no longer beats AR (None: it always does)."""
    return next((s.concurrency for s in summaries if s.advantage <= 1.0), None)
