"""Which trials run, in which order, and what they will cost: grid, race, search.

    prepare         a sweep prepared once: `prepare(spec, store) -> Sweep` (mode, strategy,
                    run spec, plan, costs), passed whole to run, plan, report and watch;
                    the mode (restart-bound or not) is the strategy's choice, from the costs
    strategies/     one module per strategy (grid, race, restart-bound race, optuna,
                    predict) and the table of them: nothing else branches on the name
    grid            configs x passes in the spec's order; a pass's seeded shuffle
    race            the F-Race rules: who stays after each pass, and when to stop (pure)
    race_planner    a race run from the store: replay the finished passes, plan the next
    starts          a restart-bound race decided bench by bench (pure; issue 27)
    start_planner   a restart-bound race run from the store: replay the trials, plan the next
    study           the Optuna study of `strategy = "optuna"`
    search_planner  the search run from the store, then a race over its best configs
    passes          trial records grouped into passes: what the race and analysis read
    planners        a sweep's costs and the lines that print them; the strategy's planner
    estimate        trials, restarts and expected hours before a sweep runs
    simulate        a simulated service for benchmarking strategies (benchmarks/)

Every planner plans from the store, so a resumed sweep decides as an
uninterrupted one would.
"""

from ddtune.sweep.plan.grid import block_order, plan_trials
from ddtune.sweep.plan.planners import Planner, estimate_text
from ddtune.sweep.plan.prepare import Sweep, plan_spec, prepare

__all__ = [
    "Planner",
    "Sweep",
    "block_order",
    "estimate_text",
    "plan_spec",
    "plan_trials",
    "prepare",
]
