"""Request-interleaved benches: several configs of one hot server, taking turns per request.

    results = run_alternated(base_url, matrix, engine, arms)

A sweep pass normally benches its configs one after another, so each config's
figure carries whatever the machine did during its own ~5 s. Here every
config (an `Arm`) sends exactly the requests its own bench would, but request
r of every arm runs before request r + 1 of any. Before each request the arm's
`switch()` sets its config on the server (a POST the controller checks) and
returns the `system_fingerprint` its response must carry; a response with
another fingerprint fails that arm, so no request is ever timed under the
wrong config. The machine's slow drift then lands on every arm of the pass
alike, and the race's comparisons, paired by pass, cancel it.

Steps:
1. One plan for all arms: the same prompts and requests, in the same order.
2. Per arm: switch, then its warmup requests (excluded from every figure).
3. For each measured request r: for each arm still running, in the pass order
   rotated by r (no arm always goes first): switch, send r, check the fingerprint.
4. Per arm: switch, then the server's identity (as `run_bench` snapshots it)
   and `finish_bench` (logit gaps under its config, the coding tests, the aggregates).
An arm whose switch or request fails stops with its error; the others go on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from ddtune.bench.client import RequestSpec, StreamRecord
from ddtune.bench.matrix import BenchMatrix
from ddtune.bench.result import BenchResult
from ddtune.bench.runner import (
    BenchPlan,
    Measured,
    bench_client,
    finish_bench,
    plan_bench,
    sender,
    snapshot_identity,
)


@dataclass
class Arm:
    """One config's share of a request-interleaved pass."""

    switch: Callable[[], str]  # sets this arm's config; returns its responses' fingerprint
    records: list[StreamRecord] = field(default_factory=list)
    result: BenchResult | None = None
    error: str | None = None  # "Type: message" of the first failure; the arm stopped there
    seconds: float = 0.0  # wall time spent switching to and benching this arm


def run_alternated(base_url: str, matrix: BenchMatrix, engine: str, arms: list[Arm]) -> list[Arm]:
    """Steps 1-4 of the module docstring; each arm ends with `result` or `error`."""
    if matrix.concurrency != 1 or matrix.load is not None:
        raise ValueError("request-interleaved benches send one request at a time, without load")
    started_at = time.time()
    with bench_client(matrix) as client:
        try:
            plan = plan_bench(client, base_url, matrix, engine)  # 1
        except Exception as exc:  # as run_bench's: every arm fails with it, the sweep goes on
            for arm in arms:
                arm.error = f"{type(exc).__name__}: {exc}"
            return arms
        send = sender(client, plan)
        for arm in arms:  # 2
            _turn(arm, send, None)
            for spec in plan.warmup:
                _turn(arm, send, spec)
        for r, spec in enumerate(plan.measured):  # 3
            for arm in arms[r % len(arms) :] + arms[: r % len(arms)]:
                _turn(arm, send, spec)
        for arm in arms:  # 4
            _turn(arm, send, None)
            _finish(arm, plan, client, started_at)
    return arms


def _turn(arm: Arm, send: Callable[[RequestSpec], StreamRecord], spec: RequestSpec | None) -> None:
    """Switch to the arm's config, then send `spec` (if any) under it; a failure ends the arm."""
    if arm.error is not None:
        return
    started = time.perf_counter()
    try:
        fingerprint = arm.switch()
        if spec is not None:
            record = send(spec)
            _check_fingerprint(spec, record, fingerprint)
            if spec.workload != "warmup":
                arm.records.append(record)
    except Exception as exc:  # this arm is out; the pass goes on with the others
        arm.error = f"{type(exc).__name__}: {exc}"
    arm.seconds += time.perf_counter() - started


def _finish(arm: Arm, plan: BenchPlan, client: httpx.Client, started_at: float) -> None:
    if arm.error is not None:
        return
    started = time.perf_counter()
    try:
        identity = snapshot_identity(client, plan.base_url, plan.engine)  # under its config
        arm.result = finish_bench(plan, client, identity, Measured(arm.records), started_at)
        arm.result.notes.append(
            "request-interleaved: each request alternated with the pass's configs"
        )
    except Exception as exc:
        arm.error = f"{type(exc).__name__}: {exc}"
    arm.seconds += time.perf_counter() - started
    if arm.result is not None:
        arm.result.duration_s = arm.seconds


class FingerprintMismatch(RuntimeError):
    """A response was decoded under another config than the one the arm set."""


def _check_fingerprint(spec: RequestSpec, record: StreamRecord, expected: str) -> None:
    if record.fingerprint != expected:
        raise FingerprintMismatch(
            f"{spec.workload} request {spec.index} was served as {record.fingerprint!r}, "
            f"expected {expected!r} (the config set just before it)"
        )


__all__ = ["Arm", "FingerprintMismatch", "run_alternated"]
