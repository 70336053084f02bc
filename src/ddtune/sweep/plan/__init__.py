"""Which trials run, in which order, and what they will cost: grid, race, search.

    grid            configs x passes in the spec's order (`plan_spec`); a pass's seeded shuffle
    race            the F-Race rules: who stays after each pass, and when to stop (pure)
    race_planner    a race run from the store: replay the finished passes, plan the next
    starts          a restart-bound race decided bench by bench (pure; issue 27)
    start_planner   a restart-bound race run from the store: replay the trials, plan the next
    mode            restart-bound or not: `[sweep] restart_bound`, from the costs
    study           the Optuna study of `strategy = "optuna"`
    search_planner  the search run from the store, then a race over its best configs
    passes          trial records grouped into passes: what the race and analysis read
    planners        which planner adds trials while a sweep runs; the cost lines it prints
    estimate        trials, restarts and expected hours before a sweep runs
    simulate        a simulated service for benchmarking strategies (benchmarks/)

Every planner plans from the store, so a resumed sweep decides as an
uninterrupted one would.
"""

from ddtune.sweep.plan.grid import block_order, plan_spec, plan_trials
from ddtune.sweep.plan.planners import Planner, estimate_text, make_planner

__all__ = [
    "Planner",
    "block_order",
    "estimate_text",
    "make_planner",
    "plan_spec",
    "plan_trials",
]
