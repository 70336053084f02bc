"""The costs of a sweep and the words for them; the strategy's mode, planner and estimates.

    costs = trial_costs(spec, store)          # measured medians, else the spec's expected
    mode = choose_mode(spec, costs)           # the strategy's choice for a new sweep
    print(estimate_text(spec, costs, mode))   # mode, trials, restarts, hours (sweep plan/run)

`prepare.py` calls these once per command (`prepare(spec, store) -> Sweep`); what
differs between strategies is theirs (`strategies/`).

Costs come from the finished trials of a store of the same service (median
stop + start-to-READY and bench seconds), else `[service] expected_start_s` /
`expected_bench_s`. See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ddtune.sweep.plan.estimate import Estimate, TrialCosts, format_duration, measured_costs
from ddtune.sweep.plan.strategies import Planner, strategy_of
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.modes import NOT_RESTART_BOUND, SweepMode


def choose_mode(spec: SweepSpec, costs: TrialCosts | None) -> SweepMode:
    """The mode a new sweep of `spec` runs in, and why (its strategy's choice)."""
    return strategy_of(spec).choose_mode(spec, costs)


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
    a restart-bound race's best, expected and worst case, then the pass-by-pass race for
    comparison."""
    mode = mode or NOT_RESTART_BOUND
    return strategy_of(spec, mode).estimates(spec, costs, mode)


def bench_text(spec: SweepSpec, costs: TrialCosts | None) -> str:
    """One bench's expected seconds per workload: the bench's expected (or measured) time
    split by each workload's share of the tokens it generates at most."""
    from ddtune.bench.suites.plan import bench_shares

    shares = bench_shares(spec.bench)
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
    from ddtune.bench.suites.names import BUNDLED, SIZES, TURNS
    from ddtune.bench.suites.plan import bundled_text

    if name == BUNDLED:
        return bundled_text(spec.bench)
    if name not in SIZES:
        return f"{name} {requests} request(s)"
    size, turns = SIZES[name], TURNS.get(name, 1)
    items = requests // turns
    title = SUITE_TITLES.get(name, name)
    whole = "all" if items >= size else f"{items} of"
    each = f" ({turns} turns each: {requests} requests)" if turns > 1 else ""
    seeded = "" if items >= size else f", seeded (bench.seed = {spec.bench.seed})"
    return f"{whole} {title}'s {size}{each}{seeded}"


def estimate_text(spec: SweepSpec, costs: TrialCosts | None, mode: SweepMode) -> str:
    """What `sweep plan` and `sweep run` print first: the mode and why, the costs, the cases."""
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


__all__ = [
    "Planner",
    "choose_mode",
    "estimate_text",
    "estimates",
    "format_duration",
    "live_eta",
    "restart_word",
    "trial_costs",
]
