"""Restart-bound sweeps: the restart-bound race vs the pass-by-pass race vs a grid, in wall hours.

    PYTHONPATH=src python benchmarks/restart_bound.py [--seeds 50] [--scenario production]

Measurement-level simulation (`ddtune.sweep.plan.simulate`, no servers): every
config change is a restart that costs `start_s`; a whole bench costs `bench_s`
and a restart-bound race benches a quarter of it at a time (a sub-bench, with a
quarter of the requests); a start moves the config's level by `start_sd`, each
request by `request_sd`, and the machine drifts (a steady trend of random sign
plus a random walk, both per hour; or a slow Ornstein-Uhlenbeck wander). The
three strategies run the sweep's own decision code: `ddtune.sweep.plan.races.by_start`
(the restart-bound race), `ddtune.sweep.plan.races.by_pass` (the pass-by-pass race: every pass
restarts every contender and benches it whole) and `ddtune.stats.blocked.decide`
over a grid. Per strategy, over the seeds: conclusive and right (separated on the
true best, or an equivalence set all truly within the tolerance of the best),
wrong (conclusive, not right), inconclusive, median and 90th-percentile wall
hours, median starts and benches. Results: docs/benchmarks.md "Restart-bound".
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ddtune.params import DecodeParams
from ddtune.stats.blocked import BlockedOptions, Verdict, decide
from ddtune.stats.mixed import VariancePrior
from ddtune.sweep.plan.races.by_pass import RaceSettings

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures")
)  # the fixtures: simulated service, sparse checkpoints
from simulated_service import (
    PRODUCTION_COSTS,
    PRODUCTION_NOISE,
    Costs,
    NoiseModel,
    SimulatedService,
    race_verdict,
    run_grid,
    run_race,
    run_start_race,
    samples_of,
)

from ddtune.sweep.plan.races.by_start import PRIORS, StartSettings

SPLITS = 4  # sub-benches of one whole bench


@dataclass(frozen=True)
class Scenario:
    title: str
    rates: dict[str, float]
    noise: NoiseModel
    costs: Costs
    tolerance: float = 0.03
    grid_passes: tuple[int, ...] = (2, 3)


def production_rates() -> dict[str, float]:
    """examples/sglang-ddtree-systemd.toml: ar + budget {4,8,12,16} x topk {4,6} x window
    {2048, none}; the best (b12 k4 wnone) 5% ahead of the runner-up (b12 k6 wnone), then
    6%, 8%, 10%, ... behind it."""
    budget = {4: 0.75, 8: 0.90, 12: 1.00, 16: 0.94}
    topk = {4: 1.00, 6: 0.95}
    window = {None: 1.00, 2048: 0.92}
    rates = {DecodeParams("ar").label(): 45.0}
    for b in budget:
        for k in topk:
            for w in window:
                label = DecodeParams("ddtree", b, k, w).label()
                rates[label] = 100.0 * budget[b] * topk[k] * window[w]
    return rates


def fake_rates(n: int = 11) -> dict[str, float]:
    """The issue's fake: 11 configs, the best 5% ahead, the others 8-40% behind; ar at 50%."""
    rates = {"ar": 50.0, "best": 100.0, "runner-up": 95.0}
    for i in range(n - 3):
        rates[f"c{i}"] = 92.0 - 4.0 * i
    return rates


SCENARIOS = {
    "production": Scenario(
        "production: 17 configs, start 480 s, bench 300 s, noise 1.5% a start, 3% a request "
        "(24 a bench), drift 1%/h steady + 1%/h random walk",
        production_rates(),
        PRODUCTION_NOISE,
        PRODUCTION_COSTS,
    ),
    "fake": Scenario(
        "fake: 11 configs, start 8 s, bench 2.5 s, noise 1% a start, 2% a request (8 a bench), "
        "1% slow drift (OU, 5 min)",
        fake_rates(),
        NoiseModel(start_sd=0.01, request_sd=0.02, requests=8, drift_sd=0.01, drift_hours=5 / 60),
        Costs(8.0, 2.5),
    ),
    "fake-drift": Scenario(
        "fake, 10% slow drift (OU, 5 min)",
        fake_rates(),
        NoiseModel(start_sd=0.01, request_sd=0.02, requests=8, drift_sd=0.10, drift_hours=5 / 60),
        Costs(8.0, 2.5),
    ),
    "fake-shared": Scenario(
        "fake on a shared host: 30% drift (OU, 5 min; other tenants come and go)",
        fake_rates(),
        NoiseModel(start_sd=0.01, request_sd=0.02, requests=8, drift_sd=0.30, drift_hours=5 / 60),
        Costs(8.0, 2.5),
    ),
}


STRESS = {  # production, each with one thing worse than the numbers
    "production, start noise 4% (above the 3% prior)": {"start_sd": 0.04},
    "production, drift 4%/h steady (no walk)": {"trend_per_hour": 0.04, "walk_per_hour": 0.0},
    "production, drift 3%/h random walk (no trend)": {"trend_per_hour": 0.0, "walk_per_hour": 0.03},
}


@dataclass
class Run:
    verdict: Verdict
    hours: float
    starts: int
    benches: int


def correct(rates: dict[str, float], verdict: Verdict, tol: float) -> bool:
    """The true best, or an equivalence set whose members are all truly within tolerance."""
    best = max(rates.values())
    if verdict.status == "equivalent":
        members = [verdict.label, *verdict.equivalent]
        return all(m is not None and rates[m] * (1 + tol) >= best for m in members)
    return verdict.label is not None and rates[verdict.label] == best


def cost(label: str) -> tuple[int, str]:
    return (len(label), label)


def new_design(s: Scenario, seed: int, settings: StartSettings) -> Run:
    service = SimulatedService(s.rates, s.noise, seed, costs=s.costs)
    race = run_start_race(service, list(s.rates), None, settings, seed)
    return Run(race.verdict(cost), service.hours, service.starts, service.trials)


def todays_race(s: Scenario, seed: int) -> Run:
    service = SimulatedService(s.rates, s.noise, seed, costs=s.costs)
    settings = RaceSettings(3, 10, s.tolerance)
    state, passes = run_race(service, list(s.rates), None, settings, seed)
    return Run(race_verdict(state, passes, cost), service.hours, service.starts, service.trials)


def grid(s: Scenario, seed: int, passes: int) -> Run:
    service = SimulatedService(s.rates, s.noise, seed, costs=s.costs)
    results = run_grid(service, list(s.rates), passes, seed)
    verdict = decide(samples_of(results), cost, BlockedOptions(tolerance=s.tolerance))
    return Run(verdict, service.hours, service.starts, service.trials)


def figures(s: Scenario, runs: list[Run]) -> dict[str, float]:
    done = [r for r in runs if r.verdict.status in ("separated", "equivalent")]
    right = sum(correct(s.rates, r.verdict, s.tolerance) for r in done)
    conclusive = len(done)
    hours = [r.hours for r in runs]
    return {
        "right": right / len(runs),
        "wrong": (conclusive - right) / len(runs),
        "inconclusive": 1 - conclusive / len(runs),
        "median h": statistics.median(hours),
        "p90 h": float(np.percentile(hours, 90)),
        "starts": statistics.median(r.starts for r in runs),
        "benches": statistics.median(r.benches for r in runs),
    }


def settings_for(s: Scenario, **overrides: object) -> StartSettings:
    base = StartSettings(
        tolerance=s.tolerance,
        most_benches=SPLITS,
        start_s=s.costs.start_s,
        bench_s=s.costs.bench_s / SPLITS,
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


def ablations(settings: StartSettings) -> dict[str, StartSettings]:
    """The restart-bound race with one part of it off (or fixed), to see what it buys."""
    return {
        "  - no drift term in the model": replace(
            settings, priors=replace(PRIORS, drift=VariancePrior(1e-5, math.inf))
        ),
        "  - no anchor (leader's reference starts)": replace(settings, anchor_every=None),
        "  - an unconfirmed leader eliminates": replace(settings, confirmed=False),
        "  - 0.05 a look (not 0.02)": replace(settings, alpha=0.05),
        "  - shuffled passes, no fold-over": replace(settings, fold=False),
        "  - no sequential test in a start": replace(settings, sequential=False),
        "  - always 4 benches a start": replace(settings, start_s=1e9),
        "  - start sd fixed at the 3% prior": replace(
            settings, priors=replace(PRIORS, start=VariancePrior(0.03, math.inf))
        ),
        "  - start prior worth 10 df (not 4)": replace(
            settings, priors=replace(PRIORS, start=VariancePrior(0.03, 10.0))
        ),
    }


def strategies(
    s: Scenario, args: argparse.Namespace, others: bool = True
) -> dict[str, Callable[[int], Run]]:
    settings = settings_for(s)
    out: dict[str, Callable[[int], Run]] = {
        "restart-bound race": lambda seed: new_design(s, seed, settings),
    }
    if args.ablations:
        for name, changed in ablations(settings).items():
            out[name] = lambda seed, changed=changed: new_design(s, seed, changed)
    if others:
        out["the pass-by-pass race (3..10 passes)"] = lambda seed: todays_race(s, seed)
    if others and not args.stress_only:
        for n in s.grid_passes:
            out[f"grid, {n} passes"] = lambda seed, n=n: grid(s, seed, n)
    return out


def scenarios(args: argparse.Namespace) -> list[Scenario]:
    chosen = [] if args.stress_only else [SCENARIOS[n] for n in args.scenario or SCENARIOS]
    if args.stress or args.stress_only:
        base = SCENARIOS["production"]
        chosen += [
            replace(base, title=title, noise=replace(base.noise, **changes))  # type: ignore[arg-type]
            for title, changes in STRESS.items()
        ]
    return chosen


def print_table(s: Scenario, args: argparse.Namespace) -> None:
    print(f"\n== {s.title}; tolerance {s.tolerance:.0%}, {args.seeds} seeds")
    print(f"   {'strategy':<34} right  wrong  inconcl   median     p90  starts  benches")
    for label, run in strategies(s, args).items():
        f = figures(s, [run(seed) for seed in range(args.seeds)])
        print(
            f"   {label:<34} {f['right']:5.0%}  {f['wrong']:5.0%}  {f['inconclusive']:7.0%}"
            f"  {_wall(f['median h']):>7}  {_wall(f['p90 h']):>6}  {f['starts']:6.0f}"
            f"  {f['benches']:7.0f}"
        )


def _wall(hours: float) -> str:
    return f"{hours:.2f} h" if hours >= 1 else f"{hours * 60:.1f} min"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--scenario", choices=list(SCENARIOS), action="append")
    parser.add_argument("--stress", action="store_true", help="also production, made harder")
    parser.add_argument("--stress-only", action="store_true")
    parser.add_argument("--ablations", action="store_true", help="each part of the design off")
    args = parser.parse_args()
    started = time.monotonic()
    print(
        "production landscape (true rates): "
        + ", ".join(
            f"{label} {rate:.1f}"
            for label, rate in sorted(production_rates().items(), key=lambda kv: -kv[1])
        )
    )
    for s in scenarios(args):
        print_table(s, args)
    print(f"\n({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
