"""The strategies a sweep can run: one module each, registered in `STRATEGIES` below.

    strategy = strategy_of(spec)          # the spec's `[sweep] strategy`
    strategy = strategy_of(spec, mode)    # what it runs as in the sweep's mode

    grid           every config, `repeats` passes, planned before the first trial
    race           F-Race: passes of the configs still in the race (`race_planner.py`)
    restart_bound  a race decided start by start (what a race runs as when restart-bound)
    optuna         a search over `[space]` ranges, then a race over its best configs
    predict        a trace predicts; a restart-bound race starts only who could win

`base.Strategy` is what each provides. A new strategy is one module here and one
line in the table; the spec's `[sweep] strategy` words are `spec/schema.py`'s.
Nothing outside this package branches on the strategy's name.
"""

from __future__ import annotations

from ddtune.sweep.plan.strategies.base import Planner, Strategy
from ddtune.sweep.plan.strategies.grid import Grid
from ddtune.sweep.plan.strategies.optuna import Optuna
from ddtune.sweep.plan.strategies.predict import Predict
from ddtune.sweep.plan.strategies.race import Race
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.store.modes import SweepMode

STRATEGIES: dict[str, Strategy] = {
    "grid": Grid(),
    "race": Race(),
    "optuna": Optuna(),
    "predict": Predict(),
}


def strategy_of(spec: SweepSpec, mode: SweepMode | None = None) -> Strategy:
    """The spec's strategy; given the sweep's mode, the one it runs as (a race may run
    restart-bound)."""
    strategy = STRATEGIES[spec.strategy]
    return strategy if mode is None else strategy.resolve(spec, mode)


__all__ = ["STRATEGIES", "Planner", "Strategy", "strategy_of"]
