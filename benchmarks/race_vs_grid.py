"""Racing vs grid, paired vs Welch, Optuna vs a grid: figures on a simulated service.

    PYTHONPATH=src python benchmarks/race_vs_grid.py [--seeds 50] [--optuna-seeds 10]

Measurement-level simulation (`ddtune.sweep.plan.simulate`): each config has a true
throughput; a bench returns it times a slow drift shared by all configs, a
per-start effect and the mean of per-request noise (parameters printed). The
race and the grid run exactly the decision code of the sweep
(`ddtune.sweep.plan.races.by_pass`, `ddtune.stats.blocked`); the search runs
`ddtune.sweep.plan.study.Search` (in-memory storage: same sampler, no fsyncs).
Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ddtune.params import DecodeParams
from ddtune.stats.blocked import BlockedOptions, Verdict, compare, decide
from ddtune.sweep.plan.races.by_pass import RaceSettings

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures")
)  # the fixtures: simulated service, sparse checkpoints
from simulated_service import (
    NoiseModel,
    SimulatedService,
    race_verdict,
    run_grid,
    run_race,
    samples_of,
)

from ddtune.sweep.plan.study import Search, SearchSpace

# The demo's grid: ar baseline + ddtree budgets 4..32 x topk 2,4 x window none,64 = 17 configs.
GRID = [DecodeParams("ar", 0, 1, None)] + [
    DecodeParams("ddtree", b, k, w)
    for b, k, w in itertools.product([4, 8, 16, 32], [2, 4], [None, 64])
]
SCENARIOS = {  # name -> true rate of the runner-up (b16 k4 w64, cheaper) relative to the best
    "clear (runner-up -5%)": 0.95,
    "near tie (runner-up -1%, within tolerance)": 0.99,
    "boundary (runner-up -3.5%)": 0.965,
}


def true_rates(runner_up: float) -> dict[str, float]:
    """Best: ddtree b16 k4 wnone = 100 tok/s; the baseline (ar) 50."""
    rates = {}
    for p in GRID:
        if p.mode == "ar":
            rates[p.label()] = 50.0
            continue
        shape = math.exp(-0.5 * ((math.log2(p.budget) - 4) / 1.3) ** 2)
        rates[p.label()] = (
            100 * shape * (1.0 if p.topk == 4 else 0.93) * (1.0 if p.window is None else runner_up)
        )
    return rates


def cost(label: str) -> tuple[int, int, float]:
    return next(p.cost() for p in GRID if p.label() == label)


def correct(rates: dict[str, float], verdict: Verdict, tol: float) -> bool:
    """The true best, or an equivalence set whose members are all truly within tolerance."""
    best = max(rates.values())
    if verdict.status == "equivalent":
        members = [verdict.label, *verdict.equivalent]
        return all(m is not None and rates[m] * (1 + tol) >= best for m in members)
    return verdict.label is not None and rates[verdict.label] == best


def within_tolerance(rates: dict[str, float], verdict: Verdict, tol: float) -> bool:
    """Looser: the recommended config (whatever the status) is truly within tolerance."""
    return verdict.label is not None and rates[verdict.label] * (1 + tol) >= max(rates.values())


def race_figures(rates: dict[str, float], args: argparse.Namespace) -> dict[str, Any]:
    labels, settings = list(rates), RaceSettings(3, args.max_passes, args.tolerance)
    right = near = conclusive = wrong_conclusive = grid_right = 0
    trials, stops = [], {}
    for seed in range(args.seeds):
        state, passes = run_race(
            SimulatedService(rates, args.noise, seed), labels, "ar", settings, seed
        )
        verdict = race_verdict(state, passes, cost)
        ok = correct(rates, verdict, args.tolerance)
        right += ok
        near += within_tolerance(rates, verdict, args.tolerance)
        conclusive += verdict.status in ("separated", "equivalent")
        wrong_conclusive += verdict.status in ("separated", "equivalent") and not ok
        trials.append(state.trials_done)
        stops[state.stop] = stops.get(state.stop, 0) + 1
        grid = run_grid(SimulatedService(rates, args.noise, seed), labels, args.max_passes, seed)
        g = decide(samples_of(grid), cost, BlockedOptions(tolerance=args.tolerance))
        grid_right += correct(rates, g, args.tolerance)
    grid_trials = len(labels) * args.max_passes
    return {
        "race right (true best, or equivalents all within tolerance)": right / args.seeds,
        "race recommends a config truly within tolerance": near / args.seeds,
        "race conclusive (separated or equivalent)": conclusive / args.seeds,
        "race conclusive but wrong": wrong_conclusive / args.seeds,
        "race trials (mean)": statistics.fmean(trials),
        "race trials / grid trials": statistics.fmean(trials) / grid_trials,
        "race stops": stops,
        "grid trials": grid_trials,
        "grid right (paired, same max passes)": grid_right / args.seeds,
    }


def separation_figures(rates: dict[str, float], args: argparse.Namespace) -> dict[str, float]:
    """How often the top two are separated (correct direction) after 3 interleaved passes."""
    top = sorted(rates, key=rates.__getitem__, reverse=True)[:2]
    hits = {"paired": 0, "welch": 0}
    for seed in range(args.seeds):
        samples = samples_of(
            run_grid(SimulatedService(rates, args.noise, seed), list(rates), 3, seed)
        )
        for method, blocked in (("paired", True), ("welch", False)):
            ratio = compare(samples[top[0]], samples[top[1]], BlockedOptions(blocked=blocked))
            hits[method] += ratio.separated and ratio.log_estimate > 0
    return {f"{m} separates top two at 3 passes": h / args.seeds for m, h in hits.items()}


WINDOW_FACTOR = {None: 0.0, 256: -0.01, 128: -0.03, 64: -0.08}
OPTUNA_SPACE = {
    "budget": {"low": 2, "high": 256, "log": True},
    "topk": {"low": 1, "high": 8},
    "window": ["none", 64, 128, 256],
}


def landscape(p: DecodeParams) -> float:
    """A smooth log-throughput bowl with a budget-topk interaction and a window penalty."""
    centre = 4 + 0.35 * (p.topk - 4)
    log_rate = (
        -0.5 * ((math.log2(p.budget) - centre) / 1.6) ** 2 - 0.5 * ((p.topk - 4.5) / 2.2) ** 2
    )
    return 100 * math.exp(log_rate + WINDOW_FACTOR[p.window])


def optuna_figures(args: argparse.Namespace) -> dict[str, Any]:
    space = SearchSpace.from_table(OPTUNA_SPACE)
    points = [
        DecodeParams("ddtree", b, k, w)
        for b, k, w in itertools.product(range(2, 257), range(1, 9), WINDOW_FACTOR)
    ]
    optimum = max(map(landscape, points))
    share = sum(landscape(p) >= 0.95 * optimum for p in points) / len(points)
    firsts, incumbents = [], []
    for seed in range(args.optuna_seeds):
        first, incumbent = _one_study(space, optimum, seed, args)
        firsts.append(first)
        incumbents.append(incumbent)
    return {
        "space size": space.size(),
        "share of configs within 5%": share,
        "trials to first within 5% (per seed)": firsts,
        "median trials to first within 5%": statistics.median(firsts),
        "random search median (geometric)": math.ceil(math.log(0.5) / math.log(1 - share)),
        f"best-observed within 5% after {args.optuna_trials} trials": sum(incumbents)
        / len(incumbents),
    }


def _one_study(
    space: SearchSpace, optimum: float, seed: int, args: argparse.Namespace
) -> tuple[float, bool]:
    rng = np.random.default_rng(10_000 + seed)
    search = Search(space, None, study_name=f"bench-{seed}", seed=seed)
    first = math.inf
    for n in range(1, args.optuna_trials + 1):
        proposal = search.ask()
        truth = landscape(proposal.params)
        noise = math.exp(rng.normal(0, math.hypot(args.noise.start_sd, args.noise.request_sd / 3)))
        search.tell(proposal.number, truth * noise)
        if first == math.inf and truth >= 0.95 * optimum:
            first = n
    best = search.best(1)[0].params
    return first, landscape(best) >= 0.95 * optimum


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--max-passes", type=int, default=10)
    parser.add_argument("--tolerance", type=float, default=0.03)
    parser.add_argument("--optuna-seeds", type=int, default=10)
    parser.add_argument("--optuna-trials", type=int, default=40)
    parser.add_argument("--skip", choices=["race", "optuna"], action="append", default=[])
    args = parser.parse_args()
    args.noise = NoiseModel()
    print(f"noise model: {asdict(args.noise)}")
    started = time.monotonic()
    if "race" not in args.skip:
        for name, runner_up in SCENARIOS.items():
            rates = true_rates(runner_up)
            print(
                f"\n== {name}: {len(rates)} configs, {args.seeds} seeds, max {args.max_passes} passes"
            )
            _print(race_figures(rates, args) | separation_figures(rates, args))
    if "optuna" not in args.skip:
        print(f"\n== Optuna (TPE) on the simulated space, {args.optuna_seeds} seeds")
        _print(optuna_figures(args))
    print(f"\n({time.monotonic() - started:.0f} s)")


def _print(figures: dict[str, Any]) -> None:
    for key, value in figures.items():
        shown = f"{value:.3f}" if isinstance(value, float) else value
        print(f"  {key}: {shown}")


if __name__ == "__main__":
    main()
