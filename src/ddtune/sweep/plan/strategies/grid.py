"""Strategy "grid": every config, `repeats` passes, all planned before the first trial."""

from __future__ import annotations

from ddtune.sweep.plan.costs import Estimate, Span, TrialCosts, grid_estimate
from ddtune.sweep.plan.strategies.base import (
    RACE_ONLY,
    Strategy,
    bench_words,
    order_words,
    refuse_start_spread,
)
from ddtune.sweep.plan.trial_order import plan_trials
from ddtune.sweep.spec.checks import fail, passes_divide
from ddtune.sweep.spec.schema import SpecDocument, SweepTable
from ddtune.sweep.store.db import PlannedTrial


class Grid(Strategy):
    name = "grid"

    @classmethod
    def repeats(cls, sweep: SweepTable) -> int:
        return sweep.repeats  # 2 when not written

    @classmethod
    def check(cls, doc: SpecDocument) -> None:
        super().check(doc)
        for name in RACE_ONLY:
            if name in doc.sweep.model_fields_set:
                fail(f"sweep.{name}", 'only applies to strategy = "race" or "optuna"')
        refuse_start_spread(doc, "a grid")
        passes_divide(doc, [("repeats", cls.repeats(doc.sweep))])

    def first_trials(self) -> list[PlannedTrial]:
        spec = self.spec
        return plan_trials(
            spec.all_configs(), spec.repeats, spec.order, spec.seed, spec.passes_per_start
        )

    def estimates(self, costs: TrialCosts) -> dict[str, Estimate]:
        spec = self.spec
        n, k = len(spec.all_configs()), spec.passes_per_start
        return {"grid": grid_estimate(n, spec.repeats, costs, k)}

    def span(self, costs: TrialCosts, capped: bool = True) -> Span:
        """A grid runs what it plans: its best, median and worst case are one."""
        grid = self.estimates(costs)["grid"]
        return Span(grid, grid, grid)

    def how_it_runs(self) -> list[str]:
        spec = self.spec
        n = len(spec.all_configs())
        head = f"Every config in every pass: {spec.repeats} passes of {n} configs"
        if spec.baseline is not None:
            head += f", the baseline ({spec.baseline.label()}) among them"
        return [head + ".", order_words(spec), *bench_words(spec)]


__all__ = ["Grid"]
