"""What a sweep will cost before it runs: trials, restarts and expected duration.

Pure arithmetic over `TrialCosts` (seconds per start and per bench, measured
from a previous store of the same service or taken from the spec), used by
`ddtune sweep plan` and the live ETA of `sweep run` (the remaining trials at
the costs measured so far in the run). A race has a best case
(every contender but one leaves after `min_passes`) and a worst case (nobody
leaves before `max_passes`). A restart-bound race (`starts.py`) also has an
expected case, from a stated typical landscape (`start_race_estimates`).
See docs/sweeps.md "Sweep" and its "Restart-bound races".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TrialCosts:
    start_s: float  # stop + start-to-ready of one restart
    bench_s: float  # one bench run against a ready server
    source: str  # where the numbers come from, shown to the user


@dataclass(frozen=True)
class Estimate:
    trials: int  # one trial = one config's bench in one pass (as `sweep plan` lists them)
    restarts: int
    benches: int
    seconds: float

    @property
    def hours(self) -> float:
        return self.seconds / 3600


def estimate(starts: int, costs: TrialCosts, passes_per_start: int = 1) -> Estimate:
    """`starts` server starts, each benched `passes_per_start` times."""
    return _timed(starts, starts * passes_per_start, costs)


def _timed(starts: int, benches: int, costs: TrialCosts) -> Estimate:
    """`starts` restarts and `benches` benches (one trial each) at `costs`."""
    return Estimate(benches, starts, benches, starts * costs.start_s + benches * costs.bench_s)


def grid_estimate(
    configs: int, passes: int, costs: TrialCosts, passes_per_start: int = 1
) -> Estimate:
    """Every config in every pass (the baseline counted among `configs`).

    A start serves `passes_per_start` consecutive passes, so a config starts
    ceil(passes / passes_per_start) times; the last start may bench fewer.
    """
    starts = configs * -(-passes // passes_per_start)
    benches = configs * passes
    return _timed(starts, benches, costs)


def race_estimates(
    configs: int,
    min_passes: int,
    max_passes: int,
    costs: TrialCosts,
    passes_per_start: int = 1,
    max_trials: int | None = None,
    max_hours: float | None = None,
) -> tuple[Estimate, Estimate]:
    """(best, worst) case of a race over `configs` configs (baseline included).

    `min_passes` and `max_passes` count starts a config gets (passes divided
    by `passes_per_start`); `max_trials` counts benches, as the spec does.

    Best: all but the winner (and the baseline, which runs every pass) leave
    at `min_passes` and the race stops. Worst: every config runs `max_passes`
    passes, unless `max_trials`, or `max_hours` at these costs, stops it first.
    """
    best = configs * min_passes
    worst = configs * max_passes
    caps = [max_trials // passes_per_start] if max_trials is not None else []
    per_trial = estimate(1, costs, passes_per_start).seconds  # one start and its benches
    if max_hours is not None and per_trial > 0:
        caps.append(int(max_hours * 3600 // per_trial))
    for cap in caps:
        best, worst = min(best, cap), min(worst, cap)
    return estimate(best, costs, passes_per_start), estimate(worst, costs, passes_per_start)


def start_race_estimates(
    configs: int,
    costs: TrialCosts,
    per_start: int,
    most_benches: int,
    max_passes: int,
    caps: tuple[int | None, float | None] = (None, None),
) -> tuple[Estimate, Estimate, Estimate]:
    """(best, expected, worst) of a restart-bound race over `configs` configs.

    One trial is one bench; `per_start` is the benches a contender's start gets.
    Best: pass 1 only, every config but the leader out after one bench.
    Expected (a typical landscape: a quarter of the configs, at least 2, still
    close after pass 1, and half of the configs out after their first bench):
    pass 1, then the contenders halving pass by pass (2c - 1 more starts).
    Worst: every config `max_passes` starts of `most_benches` benches. `caps`
    (max_trials, max_hours) bound each case.
    """
    contenders = max(2, math.ceil(configs / 4))
    later = min(2 * contenders - 1, contenders * (max_passes - 1))
    cases = (
        (configs, configs - 1 + per_start),
        (configs + later, math.ceil(configs * (1 + per_start) / 2) + later * per_start),
        (configs * max_passes, configs * max_passes * most_benches),
    )
    best, expected, worst = (_capped(s, b, costs, caps) for s, b in cases)
    return best, expected, worst


def _capped(
    starts: int, benches: int, costs: TrialCosts, caps: tuple[int | None, float | None]
) -> Estimate:
    """`starts` restarts and `benches` benches, cut at max_trials (benches) or max_hours."""
    max_trials, max_hours = caps
    fraction = 1.0
    if max_trials is not None and benches > max_trials:
        fraction = max_trials / benches
    seconds = starts * costs.start_s + benches * costs.bench_s
    if max_hours is not None and seconds * fraction > max_hours * 3600:
        fraction = max_hours * 3600 / seconds
    if fraction < 1.0:  # whole trials that fit under the cap
        starts, benches = max(1, int(starts * fraction)), max(1, int(benches * fraction))
    return _timed(starts, benches, costs)


def measured_costs(
    start_seconds: Sequence[float], bench_seconds: Sequence[float], source: str
) -> TrialCosts | None:
    """Median start and bench time of finished trials; None when nothing was measured."""
    if not start_seconds or not bench_seconds:
        return None
    return TrialCosts(statistics.median(start_seconds), statistics.median(bench_seconds), source)


def format_duration(seconds: float) -> str:
    """90 s and below in seconds, up to 90 min in minutes, then hours."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


__all__ = [
    "Estimate",
    "TrialCosts",
    "estimate",
    "format_duration",
    "grid_estimate",
    "measured_costs",
    "race_estimates",
    "start_race_estimates",
]
