"""The generation worker with a real (tiny, random) engine: FIFO order, a bounded queue,
cancellation of queued and running jobs, the config read at each job's start, and
batches: jobs run together, one failing job leaves the others alone, metrics per round."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ddtune.params import DecodeParams, SamplingParams
from ddtune.server.metrics import ServerMetrics
from ddtune.server.worker import GenerationWorker, Job, JobOutcome, QueueFull


@pytest.fixture(scope="module")
def engine(checkpoint: tuple[Path, Path]):  # noqa: ANN201 - an Engine
    from ddtune.ddtree.engine import Engine

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


def start_worker(engine, config, max_queue: int, max_batch: int = 8) -> GenerationWorker:  # noqa: ANN001
    worker = GenerationWorker(engine, config, ServerMetrics(), max_queue, max_batch)
    worker.start()
    return worker


def test_jobs_run_in_submission_order_with_the_config_current_at_their_start(engine) -> None:  # noqa: ANN001
    configs = iter([(DecodeParams("ddtree", 4, 2), g) for g in range(100)])
    worker = start_worker(engine, lambda _n: next(configs), max_queue=16)
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
    # max_batch 1: one job runs, two wait in the queue (as before batching)
    worker = start_worker(engine, lambda _n: (DecodeParams("ar"), 0), max_queue=2, max_batch=1)
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


def metric(worker: GenerationWorker, name: str) -> float:
    value = worker.metrics.registry.get_sample_value(name)
    assert value is not None, name
    return value


def test_jobs_share_rounds_and_a_failing_job_leaves_the_batch_alone(engine) -> None:  # noqa: ANN001
    params = DecodeParams("ddtree", 6, 3)
    worker = start_worker(engine, lambda _n: (params, 0), max_queue=16, max_batch=4)
    rec = Recorder()
    jobs = {name: rec.job(name, max_new_tokens=12) for name in ("a", "b", "c", "d")}
    for i, job in enumerate(jobs.values()):
        job.prompt_ids = [5 + i, 6, 7 + i]

    def broken(ids: list[int]) -> None:
        raise RuntimeError("this request's output handling broke")

    jobs["b"].on_tokens = broken
    for job in jobs.values():
        worker.submit(job)
    rec.wait(4)
    worker.stop()
    assert isinstance(rec.outcomes["b"].error, RuntimeError)
    for name in ("a", "c", "d"):
        job, got = jobs[name], rec.outcomes[name]
        ref = engine.generate(job.prompt_ids, params, job.sampling)
        assert got.error is None and got.result.token_ids == ref.token_ids
    # one round's batch held more than one request; every job's queue time was observed
    assert metric(worker, "ddtune_batch_size_count") >= 1
    assert metric(worker, "ddtune_batch_size_sum") > metric(worker, "ddtune_batch_size_count")
    assert metric(worker, "ddtune_queue_seconds_count") == 4
    assert metric(worker, "ddtune_verify_tokens_sum") >= metric(worker, "ddtune_batch_size_sum")


def test_stop_aborts_running_jobs_with_an_outcome(engine) -> None:  # noqa: ANN001
    worker = start_worker(engine, lambda _n: (DecodeParams("ar"), 0), max_queue=4, max_batch=2)
    rec = Recorder()
    running = threading.Event()
    jobs = [rec.job("x", max_new_tokens=1500), rec.job("y", max_new_tokens=1500)]
    jobs[1].on_tokens = lambda ids: running.set()
    for job in jobs:
        worker.submit(job)
    assert running.wait(60)
    worker.stop()
    rec.wait(2)
    assert {o.result.finish_reason for o in rec.outcomes.values()} == {"cancelled"}
    assert worker.pending == 0


def test_a_broken_step_fails_its_jobs_and_the_worker_goes_on(engine) -> None:  # noqa: ANN001
    worker = start_worker(engine, lambda _n: (DecodeParams("ar"), 0), max_queue=4, max_batch=2)
    real_step, calls = worker.scheduler.step, []

    def step_once_broken() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the step broke")
        real_step()

    worker.scheduler.step = step_once_broken  # type: ignore[method-assign]
    rec = Recorder()
    worker.submit(rec.job("first"))
    rec.wait(1)
    worker.submit(rec.job("second"))
    rec.wait(2)
    worker.stop()
    assert isinstance(rec.outcomes["first"].error, RuntimeError)
    assert rec.outcomes["second"].result.finish_reason == "length"


def test_a_job_that_can_never_fit_gets_an_error_instead_of_waiting(engine) -> None:  # noqa: ANN001
    """A config whose round exceeds the step budget (the server refuses it at startup and on
    reconfigure) still cannot wedge the queue: its job fails with the reason."""
    from ddtune.errors import UserError

    config = [(DecodeParams("ddtree", 40, 2), 0)]
    worker = GenerationWorker(engine, lambda _n: config[0], ServerMetrics(), 4, 2, 32)
    worker.start()
    rec = Recorder()
    worker.submit(rec.job("too-big"))
    rec.wait(1)
    config[0] = (DecodeParams("ddtree", 8, 2), 1)
    worker.submit(rec.job("fits"))
    rec.wait(2)
    worker.stop()
    assert isinstance(rec.outcomes["too-big"].error, UserError)
    assert "round of 41 tokens" in str(rec.outcomes["too-big"].error)
    assert rec.outcomes["fits"].result.finish_reason == "length"
