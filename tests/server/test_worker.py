"""The generation worker with a real (tiny, random) engine: FIFO order, a bounded queue,
cancellation of queued and running jobs, and the config read at each job's start."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ddtune.params import DecodeParams, SamplingParams
from ddtune.server.metrics import ServerMetrics
from ddtune.server.worker import GenerationWorker, Job, JobOutcome, QueueFull


@pytest.fixture(scope="module")
def engine(checkpoint: tuple[Path, Path]):  # noqa: ANN201 - an Engine
    from ddtune.engine.engine import Engine

    return Engine.load(*checkpoint)


class Recorder:
    """Collects start order and outcomes; `wait(n)` blocks until n jobs finished."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.outcomes: dict[str, JobOutcome] = {}
        self._cv = threading.Condition()

    def job(self, name: str, max_new_tokens: int = 2) -> Job:
        return Job(
            prompt_ids=[5, 6, 7],
            sampling=SamplingParams(max_new_tokens=max_new_tokens, seed=0, ignore_eos=True),
            on_done=lambda outcome: self._done(name, outcome),
            on_start=lambda params, gen: self.started.append(name),
        )

    def _done(self, name: str, outcome: JobOutcome) -> None:
        with self._cv:
            self.outcomes[name] = outcome
            self._cv.notify_all()

    def wait(self, n: int, timeout: float = 120) -> None:
        with self._cv:
            assert self._cv.wait_for(lambda: len(self.outcomes) >= n, timeout)


def start_worker(engine, config, max_queue: int) -> GenerationWorker:  # noqa: ANN001
    worker = GenerationWorker(engine, config, ServerMetrics(), max_queue)
    worker.start()
    return worker


def test_jobs_run_in_submission_order_with_the_config_current_at_their_start(engine) -> None:  # noqa: ANN001
    configs = iter([(DecodeParams("ddtree", 4, 2), g) for g in range(100)])
    worker = start_worker(engine, lambda: next(configs), max_queue=16)
    rec = Recorder()
    names = [f"job{i}" for i in range(6)]
    for name in names:
        worker.submit(rec.job(name))
    rec.wait(len(names))
    worker.stop()
    assert rec.started == names
    assert [rec.outcomes[n].config_generation for n in names] == list(range(6))
    assert all(len(rec.outcomes[n].result.token_ids) == 2 for n in names)


def test_bounded_queue_and_cancellation(engine) -> None:  # noqa: ANN001
    worker = start_worker(engine, lambda: (DecodeParams("ar"), 0), max_queue=2)
    rec = Recorder()
    long_job = rec.job("long", max_new_tokens=1500)
    running = threading.Event()
    long_job.on_tokens = lambda ids: running.set()
    worker.submit(long_job)
    assert running.wait(60)
    queued = [rec.job("a"), rec.job("b")]
    for job in queued:
        worker.submit(job)
    with pytest.raises(QueueFull):
        worker.submit(rec.job("c"))
    assert worker.pending == 3
    worker.cancel(queued[0])  # dropped while queued: never started
    worker.cancel(long_job)  # stopped after its current round
    rec.wait(2)
    assert rec.outcomes["a"].dropped and "a" not in rec.started
    assert rec.outcomes["long"].result.finish_reason == "cancelled"
    assert len(rec.outcomes["long"].result.token_ids) < 1500
    rec.wait(3)  # "b" still runs: cancelling one job leaves the others alone
    assert rec.outcomes["b"].result.finish_reason == "length"
    assert worker.wait_idle(10)
    worker.stop()
