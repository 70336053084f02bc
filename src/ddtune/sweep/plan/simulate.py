"""A simulated service for benchmarking sweep strategies at the measurement level.

Each config has a true throughput (and optionally a true pass rate). A bench of
a config returns `rate × exp(drift + start effect) × mean of per-request
factors`, where the drift is a slow Ornstein-Uhlenbeck process shared by all
configs (a loaded machine, thermal state), the start effect is drawn once per
server start and each request adds its own log-normal noise. No HTTP, no
processes: the 50-seed benchmarks (`benchmarks/race_vs_grid.py`) would take
days through real servers. See docs/architecture.md "Sweep" and
docs/benchmarks.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ddtune.stats.blocked import BlockedOptions, Verdict, decide
from ddtune.sweep.plan.grid import block_order
from ddtune.sweep.plan.race import PassResult, RaceSettings, RaceState, replay


@dataclass(frozen=True)
class NoiseModel:
    start_sd: float = 0.02  # log-sd of one server start's effect
    request_sd: float = 0.06  # log-sd of one request's throughput
    requests: int = 8  # requests averaged by one bench
    drift_sd: float = 0.05  # stationary log-sd of the drift shared by all configs
    drift_trials: float = 40.0  # correlation length of the drift, in trials
    fail_rate: float = 0.0  # probability that a trial fails (no measurement)
    coding_tasks: int = 0  # coding tasks per bench (0: pass rate not measured)


@dataclass(frozen=True)
class Bench:
    value: float | None  # None: the trial failed
    passed: int = 0
    total: int = 0


class SimulatedService:
    """True rates plus noise; every bench advances the shared clock by one trial."""

    def __init__(
        self,
        rates: Mapping[str, float],
        noise: NoiseModel,
        seed: int,
        pass_rates: Mapping[str, float] | None = None,
    ) -> None:
        self.rates = rates  # a Mapping: a dict subclass may compute missing rates
        self.pass_rates = dict(pass_rates or {})
        self.noise = noise
        self.rng = np.random.default_rng(seed)
        self.drift = float(self.rng.normal(0.0, noise.drift_sd))
        self.start_effect = 0.0
        self.trials = 0
        self.starts = 0

    def start(self, label: str) -> None:
        """A fresh server start for `label`: a new start effect."""
        self.starts += 1
        self.start_effect = float(self.rng.normal(0.0, self.noise.start_sd))

    def bench(self, label: str) -> Bench:
        """One bench of the running server; fails with probability `fail_rate`."""
        self._advance()
        if self.rng.random() < self.noise.fail_rate:
            return Bench(None)
        n = self.noise.requests
        factors = np.exp(self.rng.normal(0.0, self.noise.request_sd, size=n))
        value = self.rates[label] * math.exp(self.drift + self.start_effect) * float(factors.mean())
        total = self.noise.coding_tasks
        passed = int(self.rng.binomial(total, self.pass_rates.get(label, 1.0))) if total else 0
        return Bench(value, passed, total)

    def _advance(self) -> None:
        self.trials += 1
        rho = math.exp(-1.0 / self.noise.drift_trials)
        step = math.sqrt(1 - rho * rho) * self.noise.drift_sd
        self.drift = rho * self.drift + float(self.rng.normal(0.0, step))


def run_pass(
    service: SimulatedService, labels: Sequence[str], seed: int, pass_no: int, per_start: int = 1
) -> PassResult:
    """One pass in shuffled block order; with `per_start` > 1 each start is benched k times
    and the pass value is the geometric mean of its benches."""
    values: dict[str, float | None] = {}
    coding: dict[str, tuple[int, int]] = {}
    for label in block_order(labels, seed, pass_no):
        service.start(label)
        benches = [service.bench(label) for _ in range(per_start)]
        good = [b for b in benches if b.value is not None]
        values[label] = (
            math.exp(sum(math.log(b.value) for b in good if b.value) / len(good)) if good else None
        )
        if good and good[0].total:
            coding[label] = (sum(b.passed for b in good), sum(b.total for b in good))
    return PassResult(values, coding, seconds=float(len(labels)))


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
    "NoiseModel",
    "SimulatedService",
    "race_verdict",
    "run_grid",
    "run_pass",
    "run_race",
    "samples_of",
]
