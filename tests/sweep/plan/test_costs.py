"""Sweep cost estimates: grid, race best/worst case, measured costs."""

from __future__ import annotations

import pytest

from ddtune.sweep.plan.costs import (
    TrialCosts,
    estimate,
    grid_estimate,
    measured_costs,
    race_estimates,
)

COSTS = TrialCosts(start_s=420.0, bench_s=60.0, source="spec")  # 7-minute model load


def test_grid_estimate_counts_restarts_and_benches():
    grid = grid_estimate(17, 3, COSTS)
    assert (grid.trials, grid.restarts, grid.benches) == (51, 51, 51)
    assert grid.seconds == pytest.approx(51 * 480) and grid.hours == pytest.approx(6.8)


def test_passes_per_start_adds_benches_not_restarts():
    e = estimate(10, COSTS, passes_per_start=3)
    assert (e.trials, e.restarts, e.benches) == (30, 10, 30)
    assert e.seconds == pytest.approx(10 * 420 + 30 * 60)


def test_grid_with_passes_per_start_starts_once_a_block():
    # 3 configs, 2 passes, 2 passes a start: one start per config (as `sweep plan` lists)
    grid = grid_estimate(3, 2, COSTS, passes_per_start=2)
    assert (grid.trials, grid.restarts, grid.benches) == (6, 3, 6)
    assert grid.seconds == pytest.approx(3 * 420 + 6 * 60)
    # 5 passes at 2 a start: blocks of 2, 2, 1 passes -> 3 starts per config
    odd = grid_estimate(3, 5, COSTS, passes_per_start=2)
    assert (odd.trials, odd.restarts, odd.benches) == (15, 9, 15)


def test_race_max_trials_counts_benches_with_passes_per_start():
    _, worst = race_estimates(4, 1, 5, COSTS, passes_per_start=2, max_trials=12)
    assert (worst.trials, worst.restarts) == (12, 6)


def test_race_best_and_worst_case():
    best, worst = race_estimates(17, 3, 10, COSTS)
    assert best.trials == 51 and worst.trials == 170
    capped_best, capped_worst = race_estimates(17, 3, 10, COSTS, max_trials=80)
    assert capped_best.trials == 51 and capped_worst.trials == 80


def test_race_worst_case_stops_at_max_hours():
    # 480 s a trial: 5 hours hold 37 trials, fewer than max_trials
    best, worst = race_estimates(17, 3, 10, COSTS, max_trials=80, max_hours=5.0)
    assert worst.trials == 37 and worst.seconds <= 5.0 * 3600
    assert best.trials == 37  # even the best case cannot run its 51 trials in 5 hours


def test_measured_costs_are_medians():
    costs = measured_costs([10.0, 12.0, 50.0], [3.0, 4.0, 5.0], "store runs/x.sqlite (3 trials)")
    assert costs == TrialCosts(12.0, 4.0, "store runs/x.sqlite (3 trials)")
    assert measured_costs([], [1.0], "none") is None
