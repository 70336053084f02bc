"""The simulated service: noise structure, determinism, and a whole race against it."""

from __future__ import annotations

import math
import statistics

import pytest

from ddtune.stats.intervals import variance_components
from ddtune.sweep.plan.race_rules import RaceSettings
from ddtune.sweep.plan.simulate import (
    NoiseModel,
    SimulatedService,
    race_verdict,
    run_grid,
    run_pass,
    run_race,
    samples_of,
)

RATES = {"base": 50.0, "best": 100.0, "close": 94.0, "mid": 80.0, "slow": 60.0}


def test_same_seed_same_measurements():
    a = run_grid(SimulatedService(RATES, NoiseModel(), seed=4), list(RATES), 3, seed=4)
    b = run_grid(SimulatedService(RATES, NoiseModel(), seed=4), list(RATES), 3, seed=4)
    c = run_grid(SimulatedService(RATES, NoiseModel(), seed=5), list(RATES), 3, seed=5)
    assert a == b and a != c


def test_without_noise_a_bench_returns_the_true_rate():
    quiet = NoiseModel(start_sd=0, request_sd=0, drift_sd=0)
    service = SimulatedService(RATES, quiet, seed=0)
    service.start("close")
    assert service.bench("close").value == pytest.approx(94.0)


def test_drift_is_shared_by_all_configs():
    """The drift is a function of the trial clock, the same whichever config runs."""
    drift_only = NoiseModel(start_sd=0, request_sd=0, drift_sd=0.1, drift_trials=5)
    one, other = (SimulatedService(RATES, drift_only, seed=1) for _ in range(2))
    best = [one.bench("best").value for _ in range(20)]
    slow = [other.bench("slow").value for _ in range(20)]
    assert all(b / s == pytest.approx(100 / 60) for b, s in zip(best, slow, strict=True))
    assert statistics.stdev(math.log(b) for b in best) > 0.03  # the machine state moves


def test_failures_and_coding_counts():
    noise = NoiseModel(fail_rate=1.0, coding_tasks=4)
    result = run_pass(SimulatedService(RATES, noise, seed=0), list(RATES), seed=0, pass_no=1)
    assert all(v is None for v in result.values.values()) and result.coding == {}
    noise = NoiseModel(coding_tasks=4)
    service = SimulatedService(RATES, noise, seed=0, pass_rates={"best": 0.0})
    result = run_pass(service, list(RATES), seed=0, pass_no=1)
    assert result.coding["best"] == (0, 4) and result.coding["mid"] == (4, 4)


def test_passes_per_start_share_one_start_effect():
    starts_only = NoiseModel(start_sd=0.1, request_sd=0.02, drift_sd=0, requests=1)
    service = SimulatedService({"x": 100.0}, starts_only, seed=2)
    groups = []
    for _ in range(30):
        service.start("x")
        groups.append([service.bench("x").value for _ in range(3)])
    vc = variance_components([[math.log(v) for v in g] for g in groups])
    assert vc.between_share > 0.8  # the start effect dominates and is seen as between-start
    assert service.starts == 30 and service.trials == 90
    one = run_pass(SimulatedService({"x": 100.0}, starts_only, seed=2), ["x"], 0, 1, per_start=3)
    assert one.values["x"] is not None


def test_a_race_on_the_simulator_finds_the_best_with_fewer_trials():
    settings = RaceSettings(min_passes=3, max_passes=10)
    service = SimulatedService(RATES, NoiseModel(), seed=3)
    state, passes = run_race(service, list(RATES), "base", settings, seed=3)
    verdict = race_verdict(state, passes, cost=lambda label: label)
    assert verdict.label == "best" and state.stop is not None
    assert state.trials_done < len(RATES) * settings.max_passes
    assert service.trials == state.trials_done
    assert set(samples_of(passes)) == set(RATES)
