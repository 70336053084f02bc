"""Continuous batching: admit requests between rounds, prefill them, run batched rounds.

    scheduler = Scheduler(engine, max_batch=8, max_step_tokens=2048)
    if scheduler.can_admit(params):
        scheduler.add(BatchRequest(prompt_ids, params, sampling, on_tokens, on_done))
    while scheduler.busy:
        scheduler.step()

One `step()` is (1) requests whose `cancelled()` turned true finish
"cancelled"; (2) ONE batched round (`rounds.BatchDecoder.round`: one drafter
forward, one verify forward) for every request past its prefill; (3)
prefill, in admission order, with the step's token budget that the round
left: a prompt longer than that is prefilled in chunks over several steps;
a request whose prompt is in emits its first token and joins the next
round. Each request's tokens go through its own `OutputBuilder` (stop
tokens, stop strings, max_new_tokens) and `on_tokens` exactly as in
`Engine.generate`; when it finishes, `on_done` gets a `BatchResult` with
the same `GenerationResult`, or the error that failed this request alone
(its slot is freed, the others go on).

Token budget: a request's round costs `params.verify_tokens(block)` verify tokens
(tree budget + root; block size for dflash; 1 for ar). A request is
admitted while the batch has fewer than `max_batch` requests and the
round tokens of all admitted requests, its own included, fit
`max_step_tokens`; a step's prefill tokens + round tokens never exceed it.
Per-request stage seconds are the round's stage seconds divided by its
rows, so summing them over requests gives wall time. See
docs/ddtree.md "Engine".
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ddtune.ddtree.batch.budget import (
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_STEP_TOKENS,
    check_round_fits,
)
from ddtune.ddtree.batch.rounds import BatchDecoder, RoundReport, SeqState
from ddtune.ddtree.engine import (
    Engine,
    GenerationResult,
    GenerationStats,
    OnTokens,
    build_result,
)
from ddtune.ddtree.stops import OutputBuilder
from ddtune.errors import UserError
from ddtune.params import DecodeParams, SamplingParams

log = logging.getLogger("ddtune.ddtree")


@dataclass
class BatchResult:
    request: BatchRequest
    result: GenerationResult | None  # None when the request failed
    error: BaseException | None = None


@dataclass
class BatchRequest:
    prompt_ids: Sequence[int]
    params: DecodeParams
    sampling: SamplingParams
    on_tokens: OnTokens | None = None  # newly final ids; returning False cancels
    on_done: Callable[[BatchResult], None] | None = None  # once, from the stepping thread
    cancelled: Callable[[], bool] | None = None  # polled before every step
    tag: Any = None  # the caller's own handle


@dataclass
class _Active:
    """A request in the batch: its decoding state, output and stats."""

    request: BatchRequest
    seq: SeqState
    out: OutputBuilder
    order: int  # admission order
    started: float = field(default_factory=time.perf_counter)
    stats: GenerationStats = field(default_factory=GenerationStats)
    decoding: bool = False  # prefill done, in the rounds
    done: bool = False


class Scheduler:
    """Batches requests over one `Engine`'s models; `step()` from one thread only."""

    def __init__(
        self,
        engine: Engine,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_step_tokens: int = DEFAULT_MAX_STEP_TOKENS,
    ) -> None:
        if max_batch < 1:
            raise UserError(f"max_batch must be at least 1; got {max_batch}", key="max_batch")
        if max_step_tokens < 1:
            raise UserError(
                f"max_step_tokens must be at least 1; got {max_step_tokens}",
                key="max_step_tokens",
            )
        self.engine, self.max_batch, self.max_step_tokens = engine, max_batch, max_step_tokens
        self.decoder = BatchDecoder(engine.target, engine.drafter, max_batch)
        self.rows: list[_Active] = []  # rows[i].seq.slot == i; decoding rows first
        self.decoding = 0
        self.on_round: Callable[[RoundReport], None] | None = None
        self._order = itertools.count()

    # --- admission -------------------------------------------------------------

    def round_tokens(self, params: DecodeParams) -> int:
        """Verify tokens one request's round may take (`DecodeParams.verify_tokens`)."""
        return params.verify_tokens(self.engine.block_size)

    def check(self, params: DecodeParams) -> None:
        """`UserError` when requests with `params` could never run here."""
        if params.mode != "ar" and self.engine.drafter is None:
            raise UserError(f"mode {params.mode!r} needs a drafter; load one or use mode 'ar'")
        check_round_fits(params, self.engine.block_size, self.max_step_tokens)

    def can_admit(self, params: DecodeParams, planned: Sequence[DecodeParams] = ()) -> bool:
        """Room for one more request with `params`, after those `planned` to be added too."""
        if len(self.rows) + len(planned) >= self.max_batch:
            return False
        used = sum(self.round_tokens(p) for p in [*(a.seq.params for a in self.rows), *planned])
        return used + self.round_tokens(params) <= self.max_step_tokens

    def add(self, request: BatchRequest) -> None:
        """Admit a request (its prefill starts at the next step); `UserError` for bad input."""
        self.check(request.params)
        prompt = self.engine._check(request.prompt_ids, request.params, request.sampling)
        if not self.can_admit(request.params):
            raise RuntimeError("the batch is full; check can_admit() first")
        seq, out = _start(self.engine, prompt, request.params, request.sampling)
        self.decoder.reserve(seq.capacity)
        seq.slot = len(self.rows)
        active = _Active(request, seq, out, next(self._order))
        active.stats.prompt_tokens = len(prompt)
        self.rows.append(active)

    @property
    def busy(self) -> bool:
        return bool(self.rows)

    @property
    def size(self) -> int:
        return len(self.rows)

    # --- one step ----------------------------------------------------------------

    def step(self) -> None:
        """Cancellations, one batched round, then prefill with the budget left."""
        with torch.inference_mode():
            for active in list(self.rows):
                if active.request.cancelled is not None and active.request.cancelled():
                    self._finish(active, cancelled=True)
            self._sweep()
            self._round()
            self._sweep()
            self._prefill()
            self._sweep()

    def abort_all(self) -> None:
        """Finish every admitted request now as "cancelled" (shutdown)."""
        for active in list(self.rows):
            self._finish(active, cancelled=True)
        self._sweep()

    def fail_all(self, exc: BaseException) -> None:
        """Fail every admitted request with `exc` and start over empty (after a broken step)."""
        for active in self.rows:
            self._fail(active, exc)
        self.rows, self.decoding = [], 0

    def _round(self) -> None:
        rows = self.rows[: self.decoding]
        for active in rows:
            if active.seq.pos >= active.seq.capacity:  # no slot left for the root
                active.out.finish_reason = active.out.finish_reason or "length"
                self._finish(active)
        self._sweep()
        rows = self.rows[: self.decoding]
        if not rows:
            return
        try:
            outcomes = self.decoder.round([a.seq for a in rows], [a.out.remaining for a in rows])
        except Exception as exc:  # the batch's forward failed: every row in it fails
            log.exception("a batched round failed")
            for active in rows:
                self._fail(active, exc)
            return
        report = self.decoder.last_report
        if self.on_round is not None:
            self.on_round(report)
        for active, outcome in zip(rows, outcomes, strict=True):
            stats = active.stats
            stats.rounds += 1
            stats.acceptance_lengths.append(len(outcome.tokens))
            stats.tree_sizes.append(outcome.tree_size)
            stats.batch_rows += len(rows)
            for stage, seconds in report.seconds.items():
                stats.stage_seconds[stage] += seconds / len(rows)
            self._emit(active, outcome.tokens)

    def _prefill(self) -> None:
        left = self.max_step_tokens - sum(
            self.round_tokens(a.seq.params) for a in self.rows[: self.decoding]
        )
        waiting = sorted(self.rows[self.decoding :], key=lambda a: a.order)
        for active in waiting:
            if left <= 0:
                return
            count = min(left, active.seq.prefill_left)
            left -= count
            t0 = time.perf_counter()
            try:
                logits = self.decoder.prefill(active.seq, count)
                if logits is not None:
                    seq = active.seq
                    seq.root = seq.chooser.choose(logits)
            except Exception as exc:
                log.exception("a prefill failed")
                self._fail(active, exc)
                continue
            active.stats.prefill_seconds += time.perf_counter() - t0
            if logits is not None:
                self._to_decoding(active)
                self._emit(active, [active.seq.root])

    def _to_decoding(self, active: _Active) -> None:
        """Swap a request whose prefill ended into the first slot after the decoding rows."""
        slot, first = active.seq.slot, self.decoding
        if slot != first:
            other = self.rows[first]
            self.decoder.swap(slot, first)
            self.rows[first], self.rows[slot] = active, other
            active.seq.slot, other.seq.slot = first, slot
        active.decoding = True
        self.decoding += 1

    # --- output ------------------------------------------------------------------

    def _emit(self, active: _Active, tokens: list[int]) -> None:
        """Add a round's tokens, stream what became final; finish when done or cancelled."""
        try:
            new = active.out.add(tokens)
            callback = active.request.on_tokens
            cancelled = callback is not None and bool(new) and callback(new) is False
        except Exception as exc:  # this request's stop handling or callback: it alone fails
            log.exception("a request's output handling failed")
            self._fail(active, exc)
            return
        if cancelled and active.out.finish_reason is None:
            self._finish(active, cancelled=True)
        elif active.out.finish_reason is not None:
            self._finish(active)

    def _finish(self, active: _Active, cancelled: bool = False) -> None:
        if active.done:
            return
        out, stats, seq = active.out, active.stats, active.seq
        if cancelled:
            out.finish_reason = "cancelled"
        stats.total_seconds = time.perf_counter() - active.started
        stats.generated_tokens = len(out.ids)
        try:
            result = build_result(
                out,
                stats,
                seq.chooser.token_logprobs,
                seq.prompt_token_logprobs,
                active.request.sampling,
            )
        except Exception as exc:
            self._fail(active, exc)
            return
        self._done(active, BatchResult(active.request, result))

    def _fail(self, active: _Active, exc: BaseException) -> None:
        if not active.done:
            self._done(active, BatchResult(active.request, None, exc))

    def _done(self, active: _Active, outcome: BatchResult) -> None:
        active.done = True
        if active.request.on_done is not None:
            try:
                active.request.on_done(outcome)
            except Exception:
                log.exception("a request's on_done callback failed")

    def _sweep(self) -> None:
        """Free the slots of finished requests; the rows stay packed (decoding first)."""
        for active in [a for a in self.rows if a.done]:
            self._remove(active.seq.slot)

    def _remove(self, slot: int) -> None:
        last = len(self.rows) - 1
        if slot < self.decoding:
            last_decoding = self.decoding - 1
            self._move(last_decoding, slot)
            self._move(last, last_decoding)
            self.decoding -= 1
        else:
            self._move(last, slot)
        self.rows.pop()

    def _move(self, src: int, dst: int) -> None:
        if src == dst:
            return
        self.decoder.move(src, dst)
        self.rows[dst] = self.rows[src]
        self.rows[dst].seq.slot = dst


def _start(
    engine: Engine, prompt: list[int], params: DecodeParams, sampling: SamplingParams
) -> tuple[SeqState, OutputBuilder]:
    """A request's decoding state and output, set up as `Engine.generate` does."""
    setup = engine.setup(prompt, params, sampling)
    seq = SeqState(params, setup.chooser, setup.capacity, prompt, sampling.prompt_logprobs)
    return seq, setup.out


def generate_batch(
    engine: Engine,
    requests: Sequence[tuple[int, BatchRequest]],
    max_batch: int = DEFAULT_MAX_BATCH,
    max_step_tokens: int = DEFAULT_MAX_STEP_TOKENS,
) -> list[BatchResult]:
    """Run `(arrival step, request)` pairs to completion, FIFO; results in request order."""
    scheduler = Scheduler(engine, max_batch, max_step_tokens)
    results: dict[int, BatchResult] = {}
    pending = sorted(enumerate(requests), key=lambda item: item[1][0])
    step = 0
    while pending or scheduler.busy:
        while pending and pending[0][1][0] <= step and scheduler.can_admit(pending[0][1][1].params):
            index, (_, request) = pending.pop(0)
            request.on_done = _collect(results, index, request.on_done)
            scheduler.add(request)
        scheduler.step()
        step += 1
    return [results[i] for i in range(len(requests))]


def _collect(
    results: dict[int, BatchResult], index: int, then: Callable[[BatchResult], None] | None
) -> Callable[[BatchResult], None]:
    def on_done(outcome: BatchResult) -> None:
        results[index] = outcome
        if then is not None:
            then(outcome)

    return on_done
