"""Load generation: closed-loop concurrency levels and open-loop Poisson rates.

    result = run_load(target, matrix, prompts)     # after the single-stream bench
    result.levels     # one LevelResult per level (and per max-rate probe), latency.py
    result.requests   # measured per-request rows, each tagged with its level key

Requests go through `stream.LeanStreamer` (stdlib http.client, one
keep-alive connection per client thread). Closed loop (`concurrency = N`): N client threads; each sends its next request
when its previous one finished. Open loop (`rate = λ`): arrivals at seeded
exponential gaps (a Poisson process; the same schedule for every config), each
sent on its own thread (at most `max_in_flight` at once; a request that waits
for a free thread carries the lag in its figures). Per level: the first
`warmup_requests` requests run at the level's load and are excluded; then
`requests` measured requests (or those sent within `duration_s`). Request i
uses prompt i mod n of the chosen workload, so every config sees the same
sequence. A failed request is a row with its error; a level whose measured
requests all failed is `failed` with the server's error, never zero latency.
The client's own CPU time per level is recorded (psutil).
See docs/bench.md "Bench".
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import psutil

import ddtune.bench.acceptance as acc
from ddtune.bench.client import RequestSpec, StreamRecord
from ddtune.bench.load.config import LoadLevel, LoadTable
from ddtune.bench.load.latency import LevelResult, meets_slo, request_figures, summarize_level
from ddtune.bench.load.search import search_max_rate
from ddtune.bench.load.stream import LeanStreamer
from ddtune.bench.prompts import PromptSet
from ddtune.engines import ServerEngine
from ddtune.errors import UserError

if TYPE_CHECKING:
    from ddtune.bench.matrix import BenchMatrix


@dataclass(frozen=True)
class LoadTarget:
    """Where and how a level's requests are sent."""

    base_url: str
    engine: ServerEngine
    model: str | None
    temperature: float
    ignore_eos: bool
    timeout_s: float


@dataclass
class Sent:
    """One request as the generator saw it (times relative to the level's start)."""

    index: int
    scheduled_s: float
    lag_s: float
    record: StreamRecord | None
    error: str | None
    elapsed_s: float


@dataclass
class LoadResult:
    levels: list[LevelResult] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    max_rate: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        levels = [level.to_dict() for level in self.levels]
        return {"levels": levels, "requests": self.requests, "max_rate": self.max_rate}


def run_load(
    target: LoadTarget,
    matrix: BenchMatrix,
    prompts: PromptSet,
    traffic: Sequence[RequestSpec] = (),
) -> LoadResult:
    """Every level of `matrix.load`, then the max-rate search when asked for; `traffic`:
    the sampled requests of `bench.traffic_file` (workload "traffic")."""
    load = matrix.load
    if load is None:
        return LoadResult()
    specs = level_prompts(matrix, prompts, traffic)
    slo = matrix.slo.targets() if matrix.slo is not None else None
    out = LoadResult()

    def run(level: LoadLevel, search: bool = False) -> LevelResult:
        result, rows = run_level(target, level, load, specs, slo, _seed(matrix))
        result.search = search
        out.levels.append(result)
        out.requests += rows
        return result

    measured = [run(level) for level in load.levels()]
    if load.search == "max_rate":
        opened = [r for r in measured if r.loop == "open"]
        out.max_rate = search_max_rate(
            lambda rate: run(LoadLevel.open(rate), search=True),
            opened,
            load.slo_attainment,
            load.search_probes,
        )
    return out


def level_prompts(
    matrix: BenchMatrix, prompts: PromptSet, traffic: Sequence[RequestSpec] = ()
) -> list[RequestSpec]:
    """The request templates of the load workload (short, long, both interleaved, or the
    user's replayed traffic)."""
    load = matrix.load
    workload = "short" if load is None else load.workload
    if workload == "traffic":
        if not traffic:
            raise UserError(
                'bench.load.workload = "traffic" needs bench.traffic_file',
                key="bench.load.workload",
            )
        return list(traffic)
    chosen = {"short": ["short"], "long": ["long"], "mixed": ["short", "long"]}[workload]
    lists = [
        [RequestSpec(w, i, p, getattr(matrix, w).max_tokens, matrix.seed) for i, p in enumerate(ps)]
        for w in chosen
        if (ps := getattr(prompts, w))
    ]
    specs = [s for group in _interleave(lists) for s in group]
    if not specs:
        raise UserError(
            f"bench.load.workload: the {workload!r} workload has no prompts; "
            "choose another workload or add prompts to bench.prompts_file",
            key="bench.load.workload",
        )
    return specs


def run_level(
    target: LoadTarget,
    level: LoadLevel,
    load: LoadTable,
    specs: list[RequestSpec],
    slo: dict[str, float] | None,
    seed: int,
) -> tuple[LevelResult, list[dict[str, Any]]]:
    """One level: warm-up, measured requests, figures; rows of the measured requests."""
    warmup = load.warmup_for(level)
    process = psutil.Process()
    with httpx.Client(timeout=httpx.Timeout(target.timeout_s, connect=10.0)) as client:
        before = acc.read_counters(client, target.base_url, target.engine)
        cpu0, wall0 = _cpu_seconds(process), time.perf_counter()
        sent = _send_level(target, level, load, specs, warmup, seed)
        cpu, wall = _cpu_seconds(process) - cpu0, time.perf_counter() - wall0
        after = acc.read_counters(client, target.base_url, target.engine)
    measured = sorted((s for s in sent if s.index >= warmup), key=lambda s: s.index)
    rows = [_row(level, s, specs, target.engine, slo) for s in measured]
    result = LevelResult(level.key, level.loop, level.concurrency, level.rate, warmup=warmup)
    summarize_level(result, rows, slo)
    per_request = [(r["acceptance_length"], r["acceptance_rounds"]) for r in rows]
    result.acceptance_length, note = acc.run_acceptance(target.engine, per_request, before, after)
    if note and result.acceptance_length is not None:
        result.notes.append(note + " (the level's warm-up requests included)")
    result.client_cpu_s, result.client_cpu_share = cpu, cpu / wall if wall > 0 else None
    return result, rows


def _send_level(
    target: LoadTarget,
    level: LoadLevel,
    load: LoadTable,
    specs: list[RequestSpec],
    warmup: int,
    seed: int,
) -> list[Sent]:
    """Every request of the level (warm-up included), closed or open loop."""
    streamer = LeanStreamer(target.timeout_s)
    sender = _sender(streamer, target, specs)
    try:
        if level.concurrency is not None:
            return closed_loop(sender, level.concurrency, warmup, load)
        arrivals = poisson_arrivals(level.rate or 1.0, f"{seed}:{level.key}")
        return open_loop(sender, arrivals, load.max_in_flight, warmup, load)
    finally:
        streamer.close()


Sender = Callable[[int, float, float], Sent]  # (index, scheduled_s, level start) -> Sent


def closed_loop(send: Sender, concurrency: int, warmup: int, load: LoadTable) -> list[Sent]:
    """`concurrency` clients, each sending its next request when the last one finished."""
    lock, sent = threading.Lock(), []
    state: dict[str, Any] = {"next": 0, "measure_from": None}
    limit = load.measured_requests()
    start = time.perf_counter()

    def client() -> None:
        while True:
            with lock:
                i, now = state["next"], time.perf_counter() - start
                if i == warmup:
                    state["measure_from"] = now
                if _done(i, now, warmup, limit, load.duration_s, state["measure_from"]):
                    return
                state["next"] = i + 1
            outcome = send(i, now, start)
            with lock:
                sent.append(outcome)

    _run_threads(client, concurrency)
    return sent


def open_loop(
    send: Sender, arrivals: Iterator[float], max_in_flight: int, warmup: int, load: LoadTable
) -> list[Sent]:
    """Requests sent at the scheduled arrival times (one thread each, at most `max_in_flight`)."""
    limit = load.measured_requests()
    futures, measure_from = [], None
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max_in_flight) as pool:
        for i, at in enumerate(arrivals):
            if i == warmup:
                measure_from = at
            if _done(i, at, warmup, limit, load.duration_s, measure_from):
                break
            delay = start + at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            futures.append(pool.submit(send, i, at, start))
    return [f.result() for f in futures]


def poisson_arrivals(rate: float, seed: str) -> Iterator[float]:
    """Arrival times (s) of a Poisson process: 0, then exponential gaps of mean 1/rate."""
    rng, at = random.Random(seed), 0.0
    while True:
        yield at
        at += rng.expovariate(rate)


def _done(
    i: int, now: float, warmup: int, limit: int | None, duration: float | None, since: float | None
) -> bool:
    """No request `i` at time `now`: the measured count is reached or the duration is over."""
    if limit is not None:
        return i >= warmup + limit
    return i > warmup and since is not None and duration is not None and now >= since + duration


def _sender(streamer: LeanStreamer, target: LoadTarget, specs: list[RequestSpec]) -> Sender:
    def send(index: int, scheduled_s: float, start: float) -> Sent:
        spec = specs[index % len(specs)]
        began = time.perf_counter()
        lag = max(0.0, began - start - scheduled_s)
        try:
            record = streamer.stream(
                target.engine,
                target.base_url,
                spec,
                model=target.model,
                temperature=target.temperature,
                ignore_eos=target.ignore_eos,
            )
            return Sent(index, scheduled_s, lag, record, None, record.e2e_s)
        except Exception as exc:  # one failed request is a row with its error
            return Sent(index, scheduled_s, lag, None, str(exc), time.perf_counter() - began)

    return send


def _row(
    level: LoadLevel,
    sent: Sent,
    specs: list[RequestSpec],
    engine: ServerEngine,
    slo: dict[str, float] | None,
) -> dict[str, Any]:
    spec = specs[sent.index % len(specs)]
    row: dict[str, Any] = {
        "level": level.key,
        "index": sent.index,
        "workload": spec.workload,
        "prompt": spec.index,
        "sent_s": sent.scheduled_s,
        "error": sent.error,
    }
    record = sent.record
    if record is None:
        row.update(lag_s=sent.lag_s, e2e_s=sent.elapsed_s + sent.lag_s, ttft_s=None)
        row.update(acceptance_length=None, acceptance_rounds=0.0, meets_slo=False)
        return row
    times, counts = record.chunk_times_s, record.chunk_tokens
    n = record.output_tokens
    row.update(request_figures(record.ttft_s, record.e2e_s, times, counts, n, sent.lag_s))
    value, rounds = engine.response_acceptance(record)
    row.update(
        acceptance_length=value, acceptance_rounds=rounds, finish_reason=record.finish_reason
    )
    row["meets_slo"] = meets_slo(row, slo) if slo else None
    return row


def _run_threads(target: Callable[[], None], n: int) -> None:
    threads = [threading.Thread(target=target, daemon=True) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _seed(matrix: BenchMatrix) -> int:
    return matrix.seed if matrix.load is None or matrix.load.seed is None else matrix.load.seed


def _interleave(lists: list[list[RequestSpec]]) -> list[list[RequestSpec]]:
    """[[a0, b0], [a1, b1], ...]: one of each list per step, shorter lists cycled."""
    longest = max((len(x) for x in lists), default=0)
    return [[x[i % len(x)] for x in lists] for i in range(longest)]


__all__ = [
    "LoadResult",
    "LoadTarget",
    "closed_loop",
    "level_prompts",
    "open_loop",
    "poisson_arrivals",
    "run_level",
    "run_load",
]
