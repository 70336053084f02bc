"""The generation worker: ONE thread that owns the engine's batch scheduler, fed by a FIFO queue.

HTTP handlers never call the engine: they `submit()` a `Job` and wait for
its `on_done` callback (which the worker calls from its thread). The worker
loops: admit queued jobs in FIFO order while the batch has room
(`--max-batch` requests, `--max-step-tokens` round tokens; see
`ddtune.ddtree.batch.scheduler`), then run one scheduler step (one batched round
plus prefill). With `max_batch` 1 jobs run one at a time, as before
batching. Each job reads the decoding config when it is *admitted*, so a
hot reconfigure applies to later requests, and a schedule (`ddtune serve
--schedule`) picks it by the requests in flight then: running and queued,
the admitted one included. A job whose `cancel` event is
set is dropped while queued, or stopped before the next round while
running. A job that fails (bad input, its own output handling) gets its
error; the others in its batch go on. See docs/server.md "Server".
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ddtune.ddtree.batch.budget import DEFAULT_MAX_BATCH, DEFAULT_MAX_STEP_TOKENS
from ddtune.params import DecodeParams, SamplingParams
from ddtune.server.metrics import ServerMetrics, completion_tokens

log = logging.getLogger("ddtune.server")


class QueueFull(Exception):
    """The queue holds `max_queue` waiting jobs already."""


@dataclass
class Job:
    prompt_ids: list[int]
    sampling: SamplingParams
    on_done: Callable[[JobOutcome], None]  # called once, from the worker thread
    on_tokens: Callable[[list[int]], None] | None = None  # per committed round
    on_start: Callable[[DecodeParams, int], None] | None = None  # config it runs with
    cancel: threading.Event = field(default_factory=threading.Event)
    submitted_at: float = field(default_factory=time.monotonic)


@dataclass
class JobOutcome:
    result: Any = None  # the engine's GenerationResult; None when error/dropped
    error: BaseException | None = None
    params: DecodeParams | None = None
    config_generation: int = 0
    queue_seconds: float = 0.0
    dropped: bool = False  # cancelled before it started


class GenerationWorker:
    """Runs jobs in batches on a daemon thread; `stop()` joins it."""

    def __init__(
        self,
        engine: Any,
        current_config: Callable[[int], tuple[DecodeParams, int]],  # by requests in flight
        metrics: ServerMetrics,
        max_queue: int,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_step_tokens: int = DEFAULT_MAX_STEP_TOKENS,
    ) -> None:
        self.current_config = current_config
        self.metrics = metrics
        self.max_queue = max_queue
        from ddtune.ddtree.batch.scheduler import Scheduler  # torch: only once a model is loaded

        self.scheduler = Scheduler(engine, max_batch, max_step_tokens)
        self.scheduler.on_round = metrics.observe_round
        self._queue: deque[Job] = deque()
        self._running: dict[int, Job] = {}  # id(job) -> job, admitted and not done
        self._stopping = False
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="ddtune-generate", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, job: Job) -> None:
        with self._cv:
            if self._stopping:
                raise RuntimeError("the worker is stopping")
            if len(self._queue) >= self.max_queue:
                raise QueueFull
            self._queue.append(job)
            self.metrics.queue_depth.set(len(self._queue))
            self._cv.notify_all()

    def cancel(self, job: Job) -> None:
        """Cancel one job: dropped now if queued, stopped before its next round if running."""
        job.cancel.set()
        with self._cv:
            if job in self._queue:
                self._queue.remove(job)
                self.metrics.queue_depth.set(len(self._queue))
                self.metrics.cancelled.inc()
            else:
                return
        job.on_done(JobOutcome(dropped=True))

    def cancel_all(self) -> None:
        with self._cv:
            jobs = [*self._queue, *self._running.values()]
        for job in jobs:
            self.cancel(job)

    @property
    def pending(self) -> int:
        """Jobs queued or running."""
        with self._cv:
            return len(self._queue) + len(self._running)

    def wait_idle(self, timeout: float) -> bool:
        """Block until nothing is queued or running; False on timeout."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._queue and not self._running, timeout=timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel everything left and join the thread."""
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        self.cancel_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # --- the worker thread -------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._queue or self._running or self._stopping)
                if self._stopping:
                    break
                admitted = self._admit()
            for job, params, generation in admitted:
                self._start(job, params, generation)
            if self.scheduler.busy:
                try:
                    self.scheduler.step()
                except Exception as exc:  # a broken step: its requests fail, the worker lives on
                    log.exception("a scheduler step failed")
                    self.scheduler.fail_all(exc)
        self.scheduler.abort_all()

    def _admit(self) -> list[tuple[Job, DecodeParams, int]]:
        """Pop queued jobs (FIFO) while the batch has room; called with the lock held."""
        admitted: list[tuple[Job, DecodeParams, int]] = []
        room = self.scheduler.max_batch - self.scheduler.size
        while self._queue and len(admitted) < room:
            params, generation = self.current_config(len(self._running) + len(self._queue))
            planned = [p for _, p, _ in admitted]
            empty = not planned and not self.scheduler.busy
            if not empty and not self.scheduler.can_admit(params, planned):
                break  # (into an empty batch it goes anyway: `add` says why it cannot run)
            job = self._queue.popleft()
            self._running[id(job)] = job
            admitted.append((job, params, generation))
        if admitted:
            self.metrics.queue_depth.set(len(self._queue))
            self.metrics.running.set(len(self._running))
        return admitted

    def _start(self, job: Job, params: DecodeParams, generation: int) -> None:
        """Hand one admitted job to the scheduler (or finish it with its input error)."""
        from ddtune.ddtree.batch.scheduler import BatchRequest, BatchResult

        queued = time.monotonic() - job.submitted_at
        self.metrics.queue_seconds.observe(queued)
        outcome = JobOutcome(params=params, config_generation=generation, queue_seconds=queued)
        if job.on_start is not None:
            job.on_start(params, generation)

        def on_tokens(new_ids: list[int]) -> bool:
            if job.on_tokens is not None and not job.cancel.is_set():
                job.on_tokens(list(new_ids))
            return not job.cancel.is_set()

        request = BatchRequest(
            job.prompt_ids,
            params,
            job.sampling,
            on_tokens=on_tokens,
            on_done=lambda done: self._finish(job, outcome, done),
            cancelled=job.cancel.is_set,
        )
        try:
            self.scheduler.add(request)
        except Exception as exc:  # reported to this request; the worker lives on
            self._finish(job, outcome, BatchResult(request, None, exc))

    def _finish(self, job: Job, outcome: JobOutcome, done: Any) -> None:
        """Report a job's `BatchResult` (`done`) to metrics and to its caller."""
        outcome.result, outcome.error = done.result, done.error
        if done.error is not None:
            log.error("generation failed: %s", done.error)
        elif done.result is not None:
            result = done.result
            self.metrics.observe_generation(
                len(job.prompt_ids), completion_tokens(result), result.stats
            )
            if result.finish_reason == "cancelled":
                self.metrics.cancelled.inc()
        with self._cv:
            self._running.pop(id(job), None)
            self.metrics.running.set(len(self._running))
            self._cv.notify_all()
        job.on_done(outcome)
