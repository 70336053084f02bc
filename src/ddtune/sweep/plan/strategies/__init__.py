"""The strategies a sweep can run: one module each, registered in `STRATEGIES` below.

    spec = read_spec("examples/demo.toml")      # its `[sweep] strategy` checked by the table
    strategy = STRATEGIES[spec.strategy]        # the class; `prepare` binds it to the sweep

    grid           every config, `repeats` passes, planned before the first trial
    race           F-Race: passes of the configs still in the race; restart-bound, it runs
                   as `restart_bound.RestartBoundRace` (a race decided start by start)
    optuna         a search over `[space]` ranges, then a race over its best configs
    predict        a trace predicts; a restart-bound race starts only who could win

`base.Strategy` is what each is, with the defaults; `predict_path` is what strategy
predict would start for any spec with a trace (`sweep plan` prints it beside the race). A new strategy is one module
here and one line in the table; the spec parser asks the table for the rules of
the strategy a spec names (`spec/checks.StrategyRules`), so nothing outside this
package asks which strategy a sweep runs.
"""

from __future__ import annotations

from pathlib import Path

from ddtune.sweep.plan.strategies.base import Strategy
from ddtune.sweep.plan.strategies.grid import Grid
from ddtune.sweep.plan.strategies.optuna import Optuna
from ddtune.sweep.plan.strategies.predict import Predict
from ddtune.sweep.plan.strategies.race import Race
from ddtune.sweep.spec import parse
from ddtune.sweep.spec.parse import SweepSpec

STRATEGIES: dict[str, type[Strategy]] = {
    Grid.name: Grid,
    Race.name: Race,
    Optuna.name: Optuna,
    Predict.name: Predict,
}


def read_spec(path: str | Path) -> SweepSpec:
    """The spec at `path`, parsed and checked, its strategy's rules included."""
    return parse.read_with(path, STRATEGIES)


def parse_spec(text: str, source: str = "<spec>", base_dir: Path | None = None) -> SweepSpec:
    """`read_spec` of a TOML text (`source` names it in errors)."""
    return parse.parse_with(text, STRATEGIES, source, base_dir)


__all__ = ["STRATEGIES", "Strategy", "parse_spec", "read_spec"]
