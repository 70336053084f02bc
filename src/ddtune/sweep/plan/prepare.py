"""A sweep prepared once: the spec → mode → strategy → run spec → plan chain and the costs.

    sweep = prepare(spec, store)        # store: None when there is none yet (`sweep plan`)
    sweep.plan                          # the trials known before the first one runs
    sweep.planner(store, path, id)      # what adds trials from the results (None: a grid)
    print(sweep.estimate_text())        # the mode and why, the costs, the cases

`sweep run|retry|plan|report|watch` each prepare the sweep once and pass the
`Sweep` on whole; nothing below them derives the mode, the run spec or the plan
again. The mode is the one stored with the sweep (`store/modes.py`) when the
store holds it, else the strategy's choice from the costs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ddtune.sweep.plan.estimate import Estimate, TrialCosts
from ddtune.sweep.plan.planners import choose_mode, estimate_text, trial_costs
from ddtune.sweep.plan.strategies import Planner, Strategy, strategy_of
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.store.db import PlannedTrial, Store
from ddtune.sweep.store.modes import SweepMode, read_mode
from ddtune.sweep.store.rows import SweepRow


@dataclass(frozen=True)
class Sweep:
    """Everything a command needs to know of how a sweep runs, computed once."""

    spec: SweepSpec  # as written (a restart-bound race's estimates compare with it)
    mode: SweepMode  # restart-bound or not, and why: stored with the sweep, else chosen now
    strategy: Strategy  # the spec's strategy as it runs in `mode`
    run_spec: SweepSpec  # what runs: restart-bound, one start serves up to `most_benches`
    plan: tuple[PlannedTrial, ...]  # the trials known before the first one runs
    costs: TrialCosts | None  # a start's and a bench's seconds (None: unknown)

    def planner(self, store: Store, store_path: Path, sweep_id: int) -> Planner | None:
        """What adds trials from the results while the sweep runs (None: the plan is all)."""
        return self.strategy.planner(self.run_spec, store, store_path, sweep_id, self.mode)

    def estimates(self) -> dict[str, Estimate]:
        """Named cases of trials, restarts and seconds ({} without costs)."""
        if self.costs is None:
            return {}
        return self.strategy.estimates(self.spec, self.costs, self.mode)

    def estimate_text(self) -> str:
        """What `sweep plan` and `sweep run` print first."""
        return estimate_text(self.spec, self.costs, self.mode)

    def blocked(self, sweep: SweepRow) -> bool:
        """Does the report analyse the passes of `sweep` (this spec's, in the store) as blocks?"""
        return self.strategy.blocked(self.run_spec, sweep)


def prepare(spec: SweepSpec, store: Store | None, sweep_id: int | None = None) -> Sweep:
    """The sweep of `spec`: the mode stored with sweep `sweep_id` (default: the sweep of the
    spec's name) when `store` holds it, else the one a new sweep gets from the costs."""
    costs = trial_costs(spec, store)
    if store is not None and sweep_id is None:
        sweep_id = store.sweep_id(spec.name)
    if store is not None and sweep_id is not None:
        mode = read_mode(store, sweep_id)
    else:
        mode = choose_mode(spec, costs)
    strategy = strategy_of(spec, mode)
    runs = run_spec(spec, mode)
    return Sweep(spec, mode, strategy, runs, tuple(strategy.first_trials(runs)), costs)


def run_spec(spec: SweepSpec, mode: SweepMode) -> SweepSpec:
    """The spec a sweep runs with: restart-bound, one start serves up to `most_benches`."""
    if not mode.restart_bound:
        return spec
    return dataclasses.replace(spec, passes_per_start=mode.most_benches)


def plan_spec(spec: SweepSpec, restart_bound: bool = False) -> list[PlannedTrial]:
    """The trials known before the first one runs (grid: all; race: the first passes;
    a restart-bound race and a search: none, they plan from the results)."""
    mode = SweepMode(restart_bound, "")
    return strategy_of(spec, mode).first_trials(spec)


__all__ = ["Sweep", "plan_spec", "prepare", "run_spec"]
