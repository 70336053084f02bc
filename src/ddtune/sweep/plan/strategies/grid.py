"""Strategy "grid": every config, `repeats` passes, all planned before the first trial."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ddtune.records import SweepContext
from ddtune.sweep.plan.estimate import Estimate, TrialCosts, grid_estimate
from ddtune.sweep.plan.strategies.base import Planner, Strategy
from ddtune.sweep.plan.trial_order import plan_trials
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.store.db import PlannedTrial, Store
from ddtune.sweep.store.modes import SweepMode
from ddtune.sweep.store.rows import SweepRow

if TYPE_CHECKING:
    from ddtune.report.result import ReportSummary


class Grid:
    name = "grid"

    def choose_mode(self, spec: SweepSpec, costs: TrialCosts | None) -> SweepMode:
        return SweepMode(False, f"strategy {self.name}")

    def resolve(self, spec: SweepSpec, mode: SweepMode) -> Strategy:
        return self

    def first_trials(self, spec: SweepSpec) -> list[PlannedTrial]:
        configs = spec.all_configs()
        return plan_trials(configs, spec.repeats, spec.order, spec.seed, spec.passes_per_start)

    def planner(
        self, spec: SweepSpec, store: Store, store_path: Path, sweep_id: int, mode: SweepMode
    ) -> Planner | None:
        return None

    def estimates(self, spec: SweepSpec, costs: TrialCosts, mode: SweepMode) -> dict[str, Estimate]:
        n, k = len(spec.all_configs()), spec.passes_per_start
        return {"grid": grid_estimate(n, spec.repeats, costs, k)}

    def later(self, spec: SweepSpec) -> str:
        return ""

    def blocked(self, spec: SweepSpec, sweep: SweepRow) -> bool:
        return spec.order == "interleaved"

    def context(
        self, store: Store, sweep: SweepRow, spec: SweepSpec, mode: SweepMode
    ) -> SweepContext:
        return SweepContext("grid", spec.objective)

    def eta_more(
        self,
        spec: SweepSpec,
        summary: ReportSummary | None,
        per_trial: float,
        left: int,
        total: int,
    ) -> str:
        return ""


__all__ = ["Grid"]
