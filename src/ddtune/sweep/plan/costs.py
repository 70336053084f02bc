"""What a sweep will cost before it runs: trials, restarts and expected duration.

Pure arithmetic over `TrialCosts` (seconds per start and per bench, measured
from a previous store of the same service or taken from the spec), used by
`ddtune sweep plan` and the live ETA of `sweep run` (the remaining trials at
the costs measured so far in the run). A race has a best case
(every contender but one leaves after `min_passes`) and a worst case (nobody
leaves before `max_passes`). A restart-bound race (`races/by_start.py`) also has an
expected case, from a stated typical landscape (`start_race_estimates`).
See docs/sweeps.md "Sweep" and its "Restart-bound races".
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ddtune.sweep.plan.races.by_pass import RaceSettings
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.store.db import Store

if TYPE_CHECKING:
    from ddtune.report.result import ReportSummary

RACE_ALPHA = 0.05  # a pass-by-pass race's level, Holm-corrected within each look


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


@dataclass(frozen=True)
class Span:
    """How long a sweep may run: its best and worst case, and the median case where the
    cost model has one (a restart-bound race's expected case); a grid's are all one."""

    best: Estimate
    worst: Estimate
    median: Estimate | None = None

    def cases(self, name: str) -> dict[str, Estimate]:
        """The named cases `sweep plan` prints: `name`'s best case, expected (median) where
        known, and worst case."""
        cases = {"best case": self.best, "expected (median)": self.median, "worst case": self.worst}
        return {f"{name}, {case}": e for case, e in cases.items() if e is not None}


def estimate(starts: int, costs: TrialCosts, passes_per_start: int = 1) -> Estimate:
    """`starts` server starts, each benched `passes_per_start` times."""
    return timed(starts, starts * passes_per_start, costs)


def timed(starts: int, benches: int, costs: TrialCosts) -> Estimate:
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
    return timed(starts, benches, costs)


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
    return timed(starts, benches, costs)


def trial_costs(spec: SweepSpec, store: Store | None) -> TrialCosts | None:
    """Measured medians from `store` (any sweep in it: stop + start-to-READY seconds of fresh
    starts, bench seconds of done attempts), else the spec's expected seconds."""
    if store is not None:
        starts, benches = [], []
        for timings in store.done_timings():
            if "bench_s" in timings:
                benches.append(float(timings["bench_s"]))
            if "start_to_ready_s" in timings:
                ready = float(timings["start_to_ready_s"])
                starts.append(ready + float(timings.get("stop_to_quiet_s", 0)))
        source = f"measured: median of {len(benches)} trial(s) in {store.path}"
        measured = measured_costs(starts, benches, source)
        if measured is not None:
            return measured
    start, bench = spec.service.expected_start_s, spec.service.expected_bench_s
    if start is None or bench is None:
        return None
    return TrialCosts(start, bench, "[service] expected_start_s / expected_bench_s")


def restart_word(spec: SweepSpec) -> str:
    """What starts each trial's server config: a restart, or a hot reconfigure in place."""
    return "hot reconfigure(s)" if spec.service.control == "hot" else "restart(s)"


def live_eta(started: float, ran: int, left: int, more: Callable[[], object] | None) -> str:
    """'ETA 12m' from this run's mean trial time; '+' when the strategy may add trials."""
    if ran == 0:
        return ""
    per_trial = (time.monotonic() - started) / ran
    return f"ETA {format_duration(per_trial * left)}" + (" + later passes" if more else "")


def race_settings(spec: SweepSpec) -> RaceSettings:
    """The spec's race in blocks (`passes_per_start` passes per block)."""
    k = spec.passes_per_start
    return RaceSettings(
        min_passes=max(2, spec.min_repeats // k),
        max_passes=max(2, spec.repeats // k),
        tolerance=spec.tolerance,
        alpha=RACE_ALPHA,
        max_trials=None if spec.max_trials is None else spec.max_trials // k,
        max_hours=spec.max_hours,
    )


def race_span(spec: SweepSpec, costs: TrialCosts, configs: int) -> Span:
    """A race of `configs` configs: its best case (it decides at `min_repeats`) and its
    worst (a pass-by-pass race has no median case)."""
    k = spec.passes_per_start  # (starts of k passes each: a last start may serve fewer)
    best, worst = race_estimates(
        configs,
        -(-spec.min_repeats // k),
        -(-spec.repeats // k),
        costs,
        k,
        spec.max_trials,
        spec.max_hours,
    )
    return Span(best, worst)


def uncapped(spec: SweepSpec) -> SweepSpec:
    """`spec` without `max_trials` and `max_hours`: what its sweep would need uncut."""
    return dataclasses.replace(spec, max_trials=None, max_hours=None)


def race_more(
    spec: SweepSpec, summary: ReportSummary, per_trial: float, left: int, planned: int
) -> str:
    """The most a race can still add: survivors x passes to its limit, within its budgets."""
    context, settings = summary.context, race_settings(spec)
    if context.stop is not None:
        return "; the race has stopped"
    alive = len(summary.configs) - len(context.exits)
    passes_left = max(settings.max_passes - context.passes - (1 if left else 0), 0)
    trials = alive * passes_left * spec.passes_per_start
    if spec.max_trials is not None:
        trials = min(trials, max(spec.max_trials - planned, 0))
    if spec.max_hours is not None:
        trials = min(trials, int(max(spec.max_hours * 3600 - per_trial * planned, 0) / per_trial))
    return (
        f"; then at most {trials} more trial(s) (~{format_duration(per_trial * trials)}) "
        "if the race runs to its limits (it stops as soon as it decides)"
    )


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
    "RACE_ALPHA",
    "Estimate",
    "Span",
    "TrialCosts",
    "estimate",
    "format_duration",
    "grid_estimate",
    "live_eta",
    "measured_costs",
    "race_estimates",
    "race_more",
    "race_settings",
    "race_span",
    "restart_word",
    "start_race_estimates",
    "timed",
    "trial_costs",
    "uncapped",
]
