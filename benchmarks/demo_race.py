"""Will a race conclude? The chance, trials and minutes of a race spec at measured noise.

    PYTHONPATH=src python benchmarks/demo_race.py --store runs/demo/hot/store.sqlite \
        [--spec examples/demo-hot.toml] [--seeds 200]

Reads a finished sweep from its store (e.g. the demo's hot race) and fits the
additive model log y[pass, config] = pass + config to its throughput
objective: the config effects become the true rates of a simulated service
(`ddtune.sweep.plan.simulate`) and the residual spread its per-trial noise. Then it
replays the spec's race (`min_repeats`, `repeats`, `max_trials`, `tolerance`:
the decision code of `ddtune sweep run`) over `--seeds` simulated runs at that
noise and at 0.75x and 1.5x of it, and prints how often the race ends
conclusive (separated or equivalent), how often on the store's leader, and
the median and worst trials and minutes at the store's mean trial duration.
Without `--store`, `--rates` gives the true rates (label=rate,...) and
`--noise` the per-trial log-sd. See docs/benchmarks.md "The demo".
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import numpy as np

from ddtune.stats.blocked import config_effects
from ddtune.sweep.plan.costs import race_settings
from ddtune.sweep.plan.passes import blocked_samples

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures")
)  # the fixtures: simulated service, sparse checkpoints
from simulated_service import NoiseModel, SimulatedService, race_verdict, run_race

from ddtune.sweep.plan import read_spec
from ddtune.sweep.store.db import Store


def measured(store_path: Path, objective: str) -> tuple[dict[str, float], float, float, str]:
    """(relative rates, per-trial log-sd, mean trial seconds, baseline label) of a store."""
    store = Store(store_path, create=False)
    try:
        sweep = store.sweep_row(None)
        records = store.trial_records(sweep["id"])
        seconds = store.trial_seconds(sweep["id"])
    finally:
        store.close()
    samples = blocked_samples(records, objective)
    effects = config_effects(samples)
    top = max(effects.values())
    rates = {label: math.exp(e - top) for label, e in effects.items()}
    baseline = next(r.label for r in records if r.is_baseline)
    return rates, residual_sd(samples, effects), statistics.fmean(seconds.values()), baseline


def residual_sd(samples: dict[str, dict[int, float]], effects: dict[str, float]) -> float:
    """Per-trial log-sd left after the pass and config effects (degrees of freedom corrected)."""
    passes = sorted({p for s in samples.values() for p in s})
    offsets = {
        p: statistics.fmean(
            math.log(s[p]) - effects[label] for label, s in samples.items() if p in s
        )
        for p in passes
    }
    residuals = [
        math.log(v) - effects[label] - offsets[p]
        for label, s in samples.items()
        for p, v in s.items()
    ]
    dof = len(residuals) - len(passes) - len(samples) + 1
    return math.sqrt(math.fsum(r * r for r in residuals) / max(dof, 1))


def simulate(
    rates: dict[str, float], baseline: str, noise_sd: float, spec_path: Path, seeds: int
) -> dict[str, float]:
    """Conclusive share, share on the true best, median and max trials over `seeds` races."""
    settings = race_settings(read_spec(spec_path))
    best = max(rates, key=rates.__getitem__)
    noise = NoiseModel(start_sd=0.0, request_sd=noise_sd, requests=1, drift_sd=0.0)
    conclusive = right = 0
    trials = []
    for seed in range(seeds):
        service = SimulatedService(rates, noise, seed)
        state, passes = run_race(service, list(rates), baseline, settings, seed)
        verdict = race_verdict(state, passes, lambda label: label)
        ends = verdict.status in ("separated", "equivalent")
        conclusive += ends
        right += ends and verdict.label == best
        trials.append(service.trials)
    return {
        "conclusive": conclusive / seeds,
        "conclusive on the best": right / seeds,
        "median trials": float(np.median(trials)),
        "max trials": float(max(trials)),
    }


def parse_rates(text: str) -> dict[str, float]:
    pairs = [item.split("=", 1) for item in text.split(",")]
    return {label.strip(): float(value) for label, value in pairs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="a finished sweep's store.sqlite")
    parser.add_argument("--spec", type=Path, default=Path("examples/demo-hot.toml"))
    parser.add_argument("--rates", help="without --store: label=rate,... (the baseline first)")
    parser.add_argument("--noise", type=float, default=0.065, help="without --store: log-sd")
    parser.add_argument("--trial-seconds", type=float, default=6.3)  # a hot demo trial
    parser.add_argument("--seeds", type=int, default=200)
    args = parser.parse_args()
    if args.store is not None:
        objective = read_spec(args.spec).objective
        rates, sd, seconds, baseline = measured(args.store, objective)
    elif args.rates:
        rates, sd, seconds = parse_rates(args.rates), args.noise, args.trial_seconds
        baseline = next(iter(rates))
    else:
        parser.error("give --store, or --rates (and --noise)")
    print(f"spec {args.spec}; {len(rates)} configs; mean trial {seconds:.1f} s")
    for label, rate in sorted(rates.items(), key=lambda kv: -kv[1]):
        print(f"  {label:24s} {rate:.3f}")
    for scale in (0.75, 1.0, 1.5):
        figures = simulate(rates, baseline, sd * scale, args.spec, args.seeds)
        minutes = [figures[k] * seconds / 60 for k in ("median trials", "max trials")]
        print(
            f"noise {sd * scale:.3f} (x{scale}): conclusive {figures['conclusive']:.0%}, "
            f"on the leader {figures['conclusive on the best']:.0%}; trials median "
            f"{figures['median trials']:.0f} (~{minutes[0]:.1f} min), "
            f"max {figures['max trials']:.0f} (~{minutes[1]:.1f} min)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
