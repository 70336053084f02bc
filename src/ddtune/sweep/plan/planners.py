"""Which planner adds trials while a sweep runs, and what the sweep will cost.

    mode = sweep_mode(spec, store)  # restart-bound or not: stored with the sweep, else chosen
    planner = make_planner(spec, store, store_path, sweep_id, mode)   # None for a grid
    rows = planner.next_batch()     # trials to run next ([] = done); planner.outcome()
    print(estimate_text(spec, store, mode))   # mode, trials, restarts, hours (sweep plan/run)

Costs come from the finished trials of a store of the same service (median
stop + start-to-READY and bench seconds), else `[service] expected_start_s` /
`expected_bench_s`. See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ddtune.sweep.plan.estimate import (
    Estimate,
    TrialCosts,
    estimate,
    grid_estimate,
    measured_costs,
    race_estimates,
    start_race_estimates,
)
from ddtune.sweep.plan.mode import choose_mode
from ddtune.sweep.spec.load import SweepSpec
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.modes import SweepMode, read_mode
from ddtune.sweep.store.rows import TrialRow


class Planner(Protocol):
    def next_batch(self) -> list[TrialRow]: ...

    def outcome(self) -> str: ...


def make_planner(
    spec: SweepSpec, store: Store, store_path: Path, sweep_id: int, mode: SweepMode | None = None
) -> Planner | None:
    """The planner of the spec's strategy (a restart-bound race when `mode` says so)."""
    if spec.races and mode is not None and mode.restart_bound:
        from ddtune.sweep.plan.start_planner import StartPlanner

        return StartPlanner(spec, store, sweep_id, mode)
    if spec.races:
        from ddtune.sweep.plan.race_planner import RacePlanner

        return RacePlanner(spec, store, sweep_id)
    if spec.strategy == "optuna":
        from ddtune.sweep.plan.search_planner import SearchPlanner

        return SearchPlanner(spec, store, store_path, sweep_id)
    return None


def sweep_mode(spec: SweepSpec, store: Store | None) -> SweepMode:
    """The mode stored with this spec's sweep in `store`, else the one a new sweep gets now."""
    if store is not None:
        sweep_id = store.sweep_id(spec.name)
        if sweep_id is not None:
            return read_mode(store, sweep_id)
    mode = choose_mode(spec, trial_costs(spec, store))
    if mode.restart_bound and spec.predicting:  # the forecast is fixed with the new sweep
        from ddtune.sweep.plan.start_planner import spec_forecast

        mode = dataclasses.replace(mode, forecast=spec_forecast(spec, spec.all_configs()).to_json())
    return mode


def trial_costs(spec: SweepSpec, store: Store | None) -> TrialCosts | None:
    """Measured medians from `store` (any sweep in it), else the spec's expected seconds."""
    if store is not None:
        starts, benches = measured_timings(store)
        source = f"measured: median of {len(benches)} trial(s) in {store.path}"
        measured = measured_costs(starts, benches, source)
        if measured is not None:
            return measured
    start, bench = spec.service.expected_start_s, spec.service.expected_bench_s
    if start is None or bench is None:
        return None
    return TrialCosts(start, bench, "[service] expected_start_s / expected_bench_s")


def measured_timings(store: Store) -> tuple[list[float], list[float]]:
    """(stop + start-to-READY seconds of fresh starts, bench seconds) of done attempts."""
    starts, benches = [], []
    for timings in store.done_timings():
        if "bench_s" in timings:
            benches.append(float(timings["bench_s"]))
        if "start_to_ready_s" in timings:
            starts.append(
                float(timings["start_to_ready_s"]) + float(timings.get("stop_to_quiet_s", 0))
            )
    return starts, benches


def estimates(
    spec: SweepSpec, costs: TrialCosts, mode: SweepMode | None = None
) -> dict[str, Estimate]:
    """Named estimates: the grid, or a race's best and worst case, or a search + its race;
    a restart-bound race's best, expected and worst case, then the pass-by-pass race for comparison."""
    n, k = len(spec.all_configs()), spec.passes_per_start
    if mode is not None and mode.restart_bound:
        return _start_estimates(spec, costs, mode) | {
            f"the pass-by-pass race (restart_bound = false), {key.removeprefix('race, ')}": value
            for key, value in estimates(spec, costs).items()
        }
    if spec.strategy == "grid":
        return {"grid": grid_estimate(n, spec.repeats, costs, k)}
    if spec.strategy == "optuna" and spec.optuna is not None:
        n = spec.optuna.confirm_top + (1 if spec.baseline else 0)
    best, worst = race_estimates(
        n, spec.min_repeats // k, spec.repeats // k, costs, k, spec.max_trials, spec.max_hours
    )
    out = {"race, best case": best, "race, worst case": worst}
    if spec.strategy == "optuna" and spec.optuna is not None:
        out = {"search": estimate(spec.optuna.n_trials, costs)} | {
            f"confirm {key}": value for key, value in out.items()
        }
    return out


def _start_estimates(spec: SweepSpec, costs: TrialCosts, mode: SweepMode) -> dict[str, Estimate]:
    from ddtune.sweep.plan.start_planner import start_settings
    from ddtune.sweep.plan.starts import prior_benches

    settings = start_settings(
        spec, dataclasses.replace(mode, start_s=costs.start_s, bench_s=costs.bench_s)
    )
    cases = start_race_estimates(
        len(spec.all_configs()),
        costs,
        prior_benches(settings),
        settings.most_benches,
        settings.max_passes,
        (settings.max_trials, settings.max_hours),
    )
    names = ("best case", "expected (median)", "worst case")
    return {f"restart-bound race, {name}": e for name, e in zip(names, cases, strict=True)}


def bench_text(spec: SweepSpec, store: Store | None) -> str:
    """One bench's expected seconds per workload: the bench's expected (or measured) time
    split by each workload's share of the tokens it generates at most."""
    from ddtune.bench.suites.plan import bench_shares

    shares = bench_shares(spec.bench)
    costs = trial_costs(spec, store)
    tokens = sum(t for _, t in shares.values()) or 1
    parts = []
    for name, (requests, most) in shares.items():
        seconds = "" if costs is None else f", ~{costs.bench_s * most / tokens:.0f} s"
        parts.append(f"{_how_much(spec, name, requests)}{seconds}")
    return "  bench per trial: " + "; ".join(parts)


SUITE_TITLES = {"humaneval": "HumanEval", "mt-bench": "MT-Bench", "gsm8k": "GSM8K"}
SUITE_TITLES["agent-sessions"] = "the agent sessions"


def _how_much(spec: SweepSpec, name: str, requests: int) -> str:
    """`20 of HumanEval's 164, seeded`: how much of a suite one trial runs."""
    from ddtune.bench.suites.names import SIZES, TURNS

    if name not in SIZES:
        return f"{name} {requests} request(s)"
    size, turns = SIZES[name], TURNS.get(name, 1)
    items = requests // turns
    title = SUITE_TITLES.get(name, name)
    whole = "all" if items >= size else f"{items} of"
    each = f" ({turns} turns each: {requests} requests)" if turns > 1 else ""
    seeded = "" if items >= size else f", seeded (bench.seed = {spec.bench.seed})"
    return f"{whole} {title}'s {size}{each}{seeded}"


def estimate_text(spec: SweepSpec, store: Store | None, mode: SweepMode | None = None) -> str:
    """What `sweep plan` and `sweep run` print first: the mode and why, the costs, the cases."""
    costs = trial_costs(spec, store)
    mode = mode or choose_mode(spec, costs)
    head = f"sweep {spec.name}: strategy {spec.strategy}, {len(spec.all_configs())} config(s)"
    if spec.interleave == "request":
        head += ", each pass's configs in turns request by request"
    if costs is None:
        head += " (no cost estimate: set [service] expected_start_s and expected_bench_s)"
    else:
        head += f"; per trial {costs.start_s:.0f} s start + {costs.bench_s:.0f} s bench"
        head += f" ({costs.source})"
    lines = [head, *_trace_notes(spec)]
    if spec.races:
        kind = "restart-bound" if mode.restart_bound else "pass by pass"
        lines.append(f"  race mode: {kind}: {mode.reason}")
    if costs is None:
        return "\n".join(lines)
    for name, e in estimates(spec, costs, mode).items():
        lines.append(
            f"  {name}: {e.trials} trial(s), {e.restarts} {restart_word(spec)}, "
            f"~{format_duration(e.seconds)}"
        )
    return "\n".join(lines)


def _trace_notes(spec: SweepSpec) -> list[str]:
    """What the trace's binding to the served models could not check here (a UserError
    when the trace is of other models: before anything is stopped)."""
    if spec.trace is None:
        return []
    from ddtune.sweep.plan.start_planner import trace_binding

    return [f"  note: {note}" for note in trace_binding(spec)]


def restart_word(spec: SweepSpec) -> str:
    """What starts each trial's server config: a restart, or a hot reconfigure in place."""
    return "hot reconfigure(s)" if spec.service.control == "hot" else "restart(s)"


def live_eta(started: float, ran: int, left: int, more: Callable[[], object] | None) -> str:
    """'ETA 12m' from this run's mean trial time; '+' when a planner may add trials."""
    if ran == 0:
        return ""
    per_trial = (time.monotonic() - started) / ran
    return f"ETA {format_duration(per_trial * left)}" + (" + later passes" if more else "")


def format_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


__all__ = [
    "Planner",
    "estimate_text",
    "estimates",
    "format_duration",
    "live_eta",
    "make_planner",
    "restart_word",
    "sweep_mode",
    "trial_costs",
]
