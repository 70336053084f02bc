"""How a sweep spends its starts: the strategies, what they plan, what it will cost.

    prepare         a sweep prepared once: `prepare(spec, store) -> Sweep` (mode, bound
                    strategy, plan, costs, forecast), passed whole to run, plan, report
                    and watch
    strategies/     one module per strategy (grid, race, restart-bound race, optuna,
                    predict) and the table of them (`read_spec` checks a spec with it)
    races/          the race engines, pure folds of finished results: `by_pass` (F-Race,
                    pass by pass), `by_start` (restart-bound, bench by bench),
                    `predicting` (a trace decides who is worth a start)
    fold            a sweep's finished trials, each read from the store once
    passes          trial records grouped into passes: what the race and analysis read
    trial_order     configs x passes in the spec's order; a pass's seeded shuffle
    study           the Optuna study of `strategy = "optuna"`
    predictions     what a `[sweep] trace` predicts, read once a command
    costs           a sweep's costs, estimates and the words for them

Every strategy plans from the store, so a resumed sweep decides as an
uninterrupted one would.
"""

from ddtune.sweep.plan.prepare import Sweep, plan_spec, prepare
from ddtune.sweep.plan.strategies import STRATEGIES, parse_spec, read_spec

__all__ = [
    "STRATEGIES",
    "Sweep",
    "parse_spec",
    "plan_spec",
    "prepare",
    "read_spec",
]
