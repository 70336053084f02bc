"""Predict, then confirm: the predicting race vs the restart-bound race, in wall hours and starts.

    PYTHONPATH=src python benchmarks/predict_race.py [--seeds 50] [--scenario production ...]
        [--no-probes]

Measurement-level simulation (`ddtune.sweep.plan.simulate`, no servers) at
issue 27's production scale: 17 configs (ar + DDTree budget {4, 8, 12, 16} x
topk {4, 6} x window {2048, none}), a start of 480 s, a bench of 300 s
(benched a quarter at a time), `PRODUCTION_NOISE` (1.5% a start, 3% a request,
drift 1%/h steady + 1%/h random walk; `start-noise`, `noisy-host` and `drift` make
one of them worse than that; `noisy-host` states its 12% as the spec would).
Unlike `restart_bound.py`, each config is built from its rounds on two workloads (short context ~1k tokens, long ~8k):
a true cost of a round (a GPU-like verify whose cost grows with the tree,
mildly convex; a drafter that costs more over a whole 8k context than over
2048) and tokens a round; tok/s = tokens a round / seconds a round, measured
per workload, the objective their geometric mean.

A round is a target forward over its verify tokens plus the tree's own part
and the drafter over its window; the running baseline is probed for the
forward (a forward over n tokens, n in 1..64, with a request's noise, 30 s on
the clock) unless `--no-probes`. The trace is the exact acceptance (scenario
`production`), or a wrong one (`wrong-trace`: the service's drafter accepts 12%
less on window none than the trace says, as if traced with another drafter), or
the cost is far from a straight line (`cost-step`: a forward over more than 9
tokens costs 40% more, a GPU leaving its memory-bound regime, so every tree above
8 nodes is dearer). The true tok/s are issue 27's production landscape
(`restart_bound.py`) in the production world, each config's tokens a round what
makes its rate at that round cost. The predicting race pays for its trace: one
start plus one bench (780 s) on its clock (not a start of the service). Per
strategy over the seeds: conclusive and right, wrong, inconclusive, median and p90
hours (the sweep's clock), median and most starts in all (the sweep's, plus the
one that restores the service or applies the answer), how often a prediction
missed, and how often every config got a start (the full race).
Results: docs/benchmarks.md "Predict, then confirm".
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ddtune.params import DecodeParams
from ddtune.report.summarize import cost_key
from ddtune.sweep.plan.races.predicting import PredictRace

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures")
)  # the fixtures: simulated service, sparse checkpoints
from simulated_service import (
    PRODUCTION_COSTS,
    PRODUCTION_NOISE,
    NoiseModel,
    SimulatedService,
    run_start_race,
)

from ddtune.sweep.plan.races.by_start import StartSettings
from ddtune.sweep.plan.strategies.restart_bound import start_priors
from ddtune.trace.round_cost import Shape

sys.path.insert(0, str(Path(__file__).parent))
from restart_bound import Run as RaceRun  # noqa: E402
from restart_bound import correct  # noqa: E402

from ddtune.trace.forecast import Forecast

SPLITS = 4
CONTEXT = {"short": 1000.0, "long": 8000.0}
TRACE_S = (
    PRODUCTION_COSTS.start_s + PRODUCTION_COSTS.bench_s
)  # recording a trace: a start + a bench


@dataclass(frozen=True)
class World:
    """One scenario's truth: what the trace says, what the service does."""

    title: str
    wrong_trace: float = 1.0  # the service's τ on window none / the trace's
    cost_step: float = 1.0  # a forward over more than 9 tokens costs this much more
    noise: NoiseModel = PRODUCTION_NOISE
    stated_spread: float | None = None  # `[sweep] start_spread` as the spec states it


def configs() -> list[DecodeParams]:
    grid = [
        DecodeParams("ddtree", b, k, w)
        for b in (4, 8, 12, 16)
        for k in (4, 6)
        for w in (2048, None)
    ]
    return [DecodeParams("ar", 0, 1, None), *grid]


def rate(p: DecodeParams, workload: str) -> float:
    """The true tok/s: issue 27's production landscape (`restart_bound.production_rates`:
    the best, b12 k4 wnone, 5% ahead of b12 k6 wnone, then 6%, 8%, 10%, ... behind),
    a 2048 window losing its 8% on the long context only (short prompts fit in it)."""
    if p.mode == "ar":
        return 45.0
    budget = {4: 0.75, 8: 0.90, 12: 1.00, 16: 0.94}[p.budget]
    topk = {4: 1.00, 6: 0.95}[p.topk]
    window = 0.92**2 if p.window is not None and CONTEXT[workload] > p.window else 1.0
    return 100.0 * budget * topk * window


def tau(p: DecodeParams, workload: str, world: World | None = None) -> float:
    """Tokens a round: what makes `rate` at the true round cost (the trace's figure)."""
    return rate(p, workload) * seconds(p, workload, world or WORLDS["production"])


def share(p: DecodeParams, workload: str) -> float:
    if p.mode == "ar":
        return 0.0
    return 1.0 if p.window is None else min(p.window, CONTEXT[workload]) / CONTEXT[workload]


STEP = 1 / 45  # a plain target step at 45 tok/s


def forward(n: int, world: World) -> float:
    """The true seconds of a target forward over n tokens (what probes measure)."""
    base = STEP * (1 + 0.035 * (n - 1) + 0.0008 * (n * n - 1))
    return base * (world.cost_step if n > 9 else 1.0)


def seconds(p: DecodeParams, workload: str, world: World) -> float:
    """The true seconds of a round: a forward over its verify tokens, the tree's own part,
    the drafter's attention over the positions it sees (0.3 of a step at 8k); the rates are
    issue 27's landscape in the production world whatever the round costs (`tau`)."""
    if p.mode == "ar":
        return STEP
    n = p.budget + 1
    return forward(n, world) + STEP * (
        0.3358 + 0.30 * share(p, workload) * CONTEXT[workload] / 8000
    )


def forecast() -> Forecast:
    shapes = {
        p.label(): {
            w: Shape(
                p.mode,
                tau(p, w),
                1 if p.mode == "ar" else p.budget + 1,
                share(p, w),
                None if p.mode == "ar" else tau(p, w),
                drafter_positions=share(p, w) * CONTEXT[w],
            )
            for w in CONTEXT
        }
        for p in configs()
    }
    acceptance = {p.label(): None if p.mode == "ar" else _pooled(p, 1.0) for p in configs()}
    params = {p.label(): p for p in configs()}
    groups = {p.label(): f"window {p.window or 'none'}" for p in configs()}
    return Forecast(shapes, acceptance, lambda x: (cost_key(params[x]), x), groups=groups)


def _pooled(p: DecodeParams, factor: float) -> float:
    return sum(tau(p, w) * (factor if p.window is None else 1.0) for w in CONTEXT) / len(CONTEXT)


def truth(
    world: World,
) -> tuple[dict[str, dict[str, float]], dict[str, float], dict[str, dict[str, float]]]:
    """(label -> workload -> true tok/s, label -> true objective, label -> workload -> true τ
    measured)."""
    tps, tau_seen = {}, {}
    for p in configs():
        factor = world.wrong_trace if p.window is None and p.mode != "ar" else 1.0
        tps[p.label()] = {w: tau(p, w) * factor / seconds(p, w, world) for w in CONTEXT}
        if p.mode != "ar":
            tau_seen[p.label()] = {w: tau(p, w) * factor for w in CONTEXT}
    objective = {x: math.exp(sum(math.log(v) for v in t.values()) / 2) for x, t in tps.items()}
    return tps, objective, tau_seen


@dataclass
class Run(RaceRun):
    missed: bool = False  # a prediction missed (the race corrected it)
    full: bool = False  # every config got a start


def settings(world: World) -> StartSettings:
    return StartSettings(
        tolerance=0.03,
        most_benches=SPLITS,
        start_s=PRODUCTION_COSTS.start_s,
        bench_s=PRODUCTION_COSTS.bench_s / SPLITS,
        priors=start_priors(world.stated_spread),
    )


def one(world: World, seed: int, predicting: bool, probes: bool = True) -> Run:
    tps, objective, tau_seen = truth(world)
    service = SimulatedService(objective, world.noise, seed, costs=PRODUCTION_COSTS, workloads=tps)
    labels, fc = list(objective), forecast()
    race, measure = None, None
    if predicting:
        service.seconds += TRACE_S
        race = PredictRace(tuple(labels), labels[0], settings(world), seed, forecast=fc)
        measure = (lambda n: forward(n, world)) if probes else None
    done = run_start_race(
        service, labels, labels[0], settings(world), seed, race, tau_seen, measure
    )
    missed = isinstance(done, PredictRace) and bool(done.missed)
    full = all(e.starts for e in done.efforts.values())
    starts = service.starts + 1  # and the start that restores the service or applies the answer
    return Run(done.verdict(fc.cost), service.hours, starts, service.trials, missed, full)


WORLDS = {
    "production": World("production: the trace is exact, the cost mildly convex"),
    "wrong-trace": World("wrong trace: the service accepts 12% less on window none", 0.88),
    "cost-step": World("cost step: a forward over more than 9 tokens costs 40% more", 1.0, 1.4),
    "start-noise": World(
        "production, start noise 4% (above the 3% prior)",
        noise=replace(PRODUCTION_NOISE, start_sd=0.04),
    ),
    "noisy-host": World(
        "noisy host: a start moves a config 12%, stated as [sweep] start_spread = 0.12",
        noise=replace(PRODUCTION_NOISE, start_sd=0.12),
        stated_spread=0.12,
    ),
    "drift": World(
        "production, drift 4%/h steady (no walk)",
        noise=replace(PRODUCTION_NOISE, trend_per_hour=0.04, walk_per_hour=0.0),
    ),
}


def print_world(world: World, seeds: int, probes: bool) -> None:
    _, objective, _ = truth(world)
    ranked = sorted(objective.items(), key=lambda kv: -kv[1])
    print(f"\n== {world.title}; {seeds} seeds; probes {'on' if probes else 'off'}")
    print("   truth: " + ", ".join(f"{x} {v:.1f}" for x, v in ranked[:4]) + ", ...")
    print(
        f"   {'strategy':<22} right  wrong  inconcl  median     p90  starts (most)  benches"
        "  missed  full race"
    )
    for name, predicting in (("restart-bound race", False), ("predict, then confirm", True)):
        runs = [one(world, seed, predicting, probes) for seed in range(seeds)]
        done = [r for r in runs if r.verdict.status in ("separated", "equivalent")]
        right = sum(correct(objective, r.verdict, 0.03) for r in done)
        hours = [r.hours for r in runs]
        starts = [r.starts for r in runs]
        print(
            f"   {name:<22} {right / seeds:5.0%}  {(len(done) - right) / seeds:5.0%}  "
            f"{1 - len(done) / seeds:7.0%}  {statistics.median(hours) * 60:4.0f} min "
            f"{np.percentile(hours, 90) * 60:4.0f} min  {statistics.median(starts):5.0f} "
            f"({max(starts):2d})  {statistics.median(r.benches for r in runs):7.0f}  "
            f"{sum(r.missed for r in runs) / seeds:6.0%}  {sum(r.full for r in runs) / seeds:9.0%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--scenario", action="append", choices=sorted(WORLDS))
    parser.add_argument("--no-probes", action="store_true", help="no forward probes")
    args = parser.parse_args()
    for name in args.scenario or WORLDS:
        print_world(replace(WORLDS[name]), args.seeds, not args.no_probes)


if __name__ == "__main__":
    main()
