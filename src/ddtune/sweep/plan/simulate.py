"""A simulated service for benchmarking sweep strategies at the measurement level.

Each config has a true throughput (and optionally a true pass rate). A bench of
a config returns `rate × exp(drift + start effect) × mean of per-request
factors`, where the drift is shared by all configs (a loaded machine, thermal
state: a slow Ornstein-Uhlenbeck process in trials or in hours, a steady trend
and a random walk in hours), the start effect is drawn once per server start
and each request adds its own log-normal noise. With `Costs` the service keeps
a clock: a start takes `start_s`, a bench `bench_s` (a restart-bound race
benches 1/`splits` of it at a time, with that share of the requests), so
strategies compare in wall hours. No HTTP, no processes: the 50-seed
benchmarks (`benchmarks/race_vs_grid.py`, `benchmarks/restart_bound.py`) would
take days through real servers. See docs/sweeps.md "Sweep" and
docs/benchmarks.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ddtune.stats.blocked import BlockedOptions, Verdict, decide
from ddtune.sweep.plan.grid import block_order
from ddtune.sweep.plan.race import PassResult, RaceSettings, RaceState, replay
from ddtune.sweep.plan.starts import BenchResult, StartRace, StartSettings


@dataclass(frozen=True)
class NoiseModel:
    start_sd: float = 0.02  # log-sd of one server start's effect
    request_sd: float = 0.06  # log-sd of one request's throughput
    requests: int = 8  # requests averaged by one (whole) bench
    drift_sd: float = 0.05  # stationary log-sd of the drift shared by all configs
    drift_trials: float = 40.0  # correlation length of the drift, in trials
    drift_hours: float | None = None  # ... in hours instead (needs Costs: the clock)
    trend_per_hour: float = 0.0  # a steady drift of the log level; its sign drawn per seed
    walk_per_hour: float = 0.0  # a random-walk drift: its log-sd after one hour
    fail_rate: float = 0.0  # probability that a trial fails (no measurement)
    coding_tasks: int = 0  # coding tasks per bench (0: pass rate not measured)


@dataclass(frozen=True)
class Costs:
    """Seconds of one restart (stop + start to READY) and of one whole bench."""

    start_s: float = 0.0
    bench_s: float = 0.0


# Issue 27's production scale: GPU-like noise (1.5% a start, 3% a request, 24 requests a
# bench), drift 1%/h steady + a 1%/h random walk; a 7-minute-class restart, a 5-minute bench.
# `benchmarks/restart_bound.py` measures the race on it; the tests decide on it.
PRODUCTION_NOISE = NoiseModel(
    start_sd=0.015,
    request_sd=0.03,
    requests=24,
    drift_sd=0.0,
    trend_per_hour=0.01,
    walk_per_hour=0.01,
)
PRODUCTION_COSTS = Costs(480.0, 300.0)


@dataclass(frozen=True)
class Bench:
    value: float | None  # None: the trial failed
    passed: int = 0
    total: int = 0
    tps: tuple[tuple[str, float], ...] = ()  # per workload, when the service has workloads


class SimulatedService:
    """True rates plus noise; every start and bench advances the shared clock."""

    def __init__(
        self,
        rates: Mapping[str, float],
        noise: NoiseModel,
        seed: int,
        pass_rates: Mapping[str, float] | None = None,
        costs: Costs | None = None,
        workloads: Mapping[str, Mapping[str, float]] | None = None,
    ) -> None:
        """`workloads`: label -> workload -> true tok/s; a bench then measures each (its own
        request noise) and its value is their geometric mean (the throughput objective)."""
        self.rates = rates  # a Mapping: a dict subclass may compute missing rates
        self.workloads = workloads
        self.pass_rates = dict(pass_rates or {})
        self.noise = noise
        self.costs = costs or Costs()
        self.rng = np.random.default_rng(seed)
        self.drift = float(self.rng.normal(0.0, noise.drift_sd))
        self.trend = noise.trend_per_hour  # its sign drawn only when there is one (same streams)
        if self.trend:
            self.trend *= 1 if self.rng.random() < 0.5 else -1
        self.walk = 0.0
        self.start_effect = 0.0
        self.trials = 0
        self.starts = 0
        self.seconds = 0.0

    @property
    def hours(self) -> float:
        return self.seconds / 3600

    def start(self, label: str) -> None:
        """A fresh server start for `label`: a new start effect, `start_s` on the clock."""
        self.starts += 1
        self._elapse(self.costs.start_s)
        self.start_effect = float(self.rng.normal(0.0, self.noise.start_sd))

    def bench(self, label: str, splits: int = 1) -> Bench:
        """One bench (1/`splits` of one) of the running server; fails with `fail_rate`."""
        self.trials += 1
        self._elapse(self.costs.bench_s / splits)
        if self.noise.drift_hours is None:
            self._ou(1.0 / self.noise.drift_trials)
        if self.rng.random() < self.noise.fail_rate:
            return Bench(None)
        n = max(1, round(self.noise.requests / splits))
        level = self.drift + self.trend * self.hours + self.walk + self.start_effect
        tps: tuple[tuple[str, float], ...] = ()
        if self.workloads is None:
            factors = np.exp(self.rng.normal(0.0, self.noise.request_sd, size=n))
            value = self.rates[label] * math.exp(level) * float(factors.mean())
        else:
            tps = tuple(
                (w, rate * math.exp(level) * float(self._factors(max(1, n // 2)).mean()))
                for w, rate in self.workloads[label].items()
            )
            value = math.exp(sum(math.log(v) for _, v in tps) / len(tps))
        total = self.noise.coding_tasks
        passed = int(self.rng.binomial(total, self.pass_rates.get(label, 1.0))) if total else 0
        return Bench(value, passed, total, tps)

    def _factors(self, n: int) -> np.ndarray:
        return np.exp(self.rng.normal(0.0, self.noise.request_sd, size=n))

    def _elapse(self, seconds: float) -> None:
        """Advance the clock; the drift in hours moves with it."""
        if seconds <= 0:
            return
        self.seconds += seconds
        hours = seconds / 3600
        if self.noise.walk_per_hour:
            self.walk += float(self.rng.normal(0.0, self.noise.walk_per_hour * math.sqrt(hours)))
        if self.noise.drift_hours is not None:
            self._ou(hours / self.noise.drift_hours)

    def _ou(self, steps: float) -> None:
        """The Ornstein-Uhlenbeck drift over `steps` correlation lengths."""
        rho = math.exp(-steps)
        step = math.sqrt(1 - rho * rho) * self.noise.drift_sd
        self.drift = rho * self.drift + float(self.rng.normal(0.0, step))


def run_pass(
    service: SimulatedService, labels: Sequence[str], seed: int, pass_no: int, per_start: int = 1
) -> PassResult:
    """One pass in shuffled block order; with `per_start` > 1 each start is benched k times
    and the pass value is the geometric mean of its benches."""
    values: dict[str, float | None] = {}
    coding: dict[str, tuple[int, int]] = {}
    before = service.seconds
    for label in block_order(labels, seed, pass_no):
        service.start(label)
        benches = [service.bench(label) for _ in range(per_start)]
        good = [b for b in benches if b.value is not None]
        values[label] = (
            math.exp(sum(math.log(b.value) for b in good if b.value) / len(good)) if good else None
        )
        if good and good[0].total:
            coding[label] = (sum(b.passed for b in good), sum(b.total for b in good))
    clocked = service.costs.start_s > 0 or service.costs.bench_s > 0
    return PassResult(values, coding, service.seconds - before if clocked else float(len(labels)))


def run_race(
    service: SimulatedService,
    contenders: Sequence[str],
    baseline: str | None,
    settings: RaceSettings,
    seed: int,
) -> tuple[RaceState, list[PassResult]]:
    """A whole race, planned pass by pass from the finished passes (as the runner does)."""
    passes: list[PassResult] = []
    state = replay(contenders, baseline, passes, settings)
    while state.stop is None:
        passes.append(run_pass(service, state.scheduled(), seed, len(passes) + 1))
        state = replay(contenders, baseline, passes, settings)
    return state, passes


def run_start_race(
    service: SimulatedService,
    contenders: Sequence[str],
    baseline: str | None,
    settings: StartSettings,
    seed: int,
    race: StartRace | None = None,
    acceptance: Mapping[str, float] | None = None,
) -> StartRace:
    """A restart-bound race, bench by bench: each bench 1/`most_benches` of a whole one.
    `race`: a race of another kind to run (a `PredictRace`); `acceptance`: the service's
    true acceptance length per config, measured by every bench."""
    race = race or StartRace(tuple(contenders), baseline, settings, seed)
    while (step := race.next()) is not None:
        before = service.seconds
        if step.bench == 1:
            service.start(step.label)
        bench = service.bench(step.label, splits=settings.most_benches)
        coding = (bench.passed, bench.total) if bench.total else None
        spent = service.seconds - before
        result = BenchResult(step.label, step.start, step.bench, bench.value, coding)
        tau = (acceptance or {}).get(step.label)
        race.add(replace(result, hours=service.hours, seconds=spent, tps=bench.tps, acceptance=tau))
    return race


def run_grid(
    service: SimulatedService, labels: Sequence[str], n_passes: int, seed: int
) -> list[PassResult]:
    """Every config in every pass (interleaved, shuffled within each pass)."""
    return [run_pass(service, labels, seed, p) for p in range(1, n_passes + 1)]


def samples_of(
    passes: Sequence[PassResult], labels: Sequence[str] | None = None
) -> dict[str, dict[int, float]]:
    """label -> pass number -> value for completed trials (optionally only `labels`)."""
    out: dict[str, dict[int, float]] = {}
    for pass_no, result in enumerate(passes, start=1):
        for label, value in result.values.items():
            if value is not None and (labels is None or label in labels):
                out.setdefault(label, {})[pass_no] = value
    return out


def race_verdict(
    state: RaceState, passes: Sequence[PassResult], cost: Callable[[str], object]
) -> Verdict:
    """The race's answer: the verdict among the contenders still alive at the stop."""
    options = BlockedOptions(tolerance=state.settings.tolerance, alpha=state.settings.alpha)
    return decide(samples_of(passes, state.alive), cost, options)


__all__ = [
    "Bench",
    "Costs",
    "NoiseModel",
    "PRODUCTION_COSTS",
    "PRODUCTION_NOISE",
    "SimulatedService",
    "race_verdict",
    "run_grid",
    "run_pass",
    "run_race",
    "run_start_race",
    "samples_of",
]
