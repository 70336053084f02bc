"""The generation worker: ONE thread that owns the engine, fed by a fair FIFO queue.

The engine serves one request at a time, so HTTP handlers never call it:
they `submit()` a `Job` and wait for its `on_done` callback (which the worker
calls from its thread). Each job reads the decoding config when it *starts*,
so a hot reconfigure applies between requests. A job whose `cancel` event is
set is dropped while queued, or stopped after its current round while running.
See docs/architecture.md "Server".
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
    """Runs jobs one by one on a daemon thread; `stop()` joins it."""

    def __init__(
        self,
        engine: Any,
        current_config: Callable[[], tuple[DecodeParams, int]],
        metrics: ServerMetrics,
        max_queue: int,
    ) -> None:
        self.engine = engine
        self.current_config = current_config
        self.metrics = metrics
        self.max_queue = max_queue
        self._queue: deque[Job] = deque()
        self._running: Job | None = None
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
        """Cancel one job: dropped now if queued, stopped after its round if running."""
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
            jobs = [*self._queue, *([self._running] if self._running else [])]
        for job in jobs:
            self.cancel(job)

    @property
    def pending(self) -> int:
        """Jobs queued or running."""
        with self._cv:
            return len(self._queue) + (self._running is not None)

    def wait_idle(self, timeout: float) -> bool:
        """Block until nothing is queued or running; False on timeout."""
        with self._cv:
            return self._cv.wait_for(
                lambda: not self._queue and self._running is None, timeout=timeout
            )

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel everything left and join the thread."""
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        self.cancel_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            # 1. Wait for the oldest job (FIFO = fair), or for stop().
            with self._cv:
                self._cv.wait_for(lambda: self._queue or self._stopping)
                if self._stopping:
                    return
                job = self._running = self._queue.popleft()
                self.metrics.queue_depth.set(len(self._queue))
                self.metrics.running.set(1)
            # 2. Run it with the config current *now*, then report.
            try:
                outcome = self._run(job)
            finally:
                with self._cv:
                    self._running = None
                    self.metrics.running.set(0)
                    self._cv.notify_all()
            job.on_done(outcome)

    def _run(self, job: Job) -> JobOutcome:
        params, generation = self.current_config()
        outcome = JobOutcome(
            params=params,
            config_generation=generation,
            queue_seconds=time.monotonic() - job.submitted_at,
        )

        if job.on_start is not None:
            job.on_start(params, generation)

        def on_tokens(new_ids: list[int]) -> bool:
            if job.on_tokens is not None and not job.cancel.is_set():
                job.on_tokens(list(new_ids))
            return not job.cancel.is_set()

        try:
            outcome.result = self.engine.generate(job.prompt_ids, params, job.sampling, on_tokens)
        except Exception as exc:  # reported to this request; the worker lives on
            log.exception("generation failed")
            outcome.error = exc
            return outcome
        stats = outcome.result.stats
        self.metrics.observe_generation(
            len(job.prompt_ids), completion_tokens(outcome.result), stats
        )
        if outcome.result.finish_reason == "cancelled":
            self.metrics.cancelled.inc()
        return outcome
