"""Strategy "race" (F-Race): every config's first passes, then pass by pass only the
configs not yet shown worse (and the baseline), until the race decides or its limits.

Restart-bound or not is chosen once (`race_mode`); restart-bound, it runs as
`restart_bound.py`'s race.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ddtune.records import SweepContext
from ddtune.sweep.plan.estimate import Estimate, TrialCosts
from ddtune.sweep.plan.race_planner import (
    RacePlanner,
    race_cases,
    race_context,
    race_more,
    sweep_configs,
)
from ddtune.sweep.plan.strategies.base import Planner, Strategy
from ddtune.sweep.plan.strategies.restart_bound import RestartBoundRace, race_mode
from ddtune.sweep.plan.trial_order import plan_trials
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.store.db import PlannedTrial, Store
from ddtune.sweep.store.modes import SweepMode
from ddtune.sweep.store.rows import SweepRow

if TYPE_CHECKING:
    from ddtune.report.result import ReportSummary


class Race:
    name = "race"

    def choose_mode(self, spec: SweepSpec, costs: TrialCosts | None) -> SweepMode:
        return race_mode(spec, costs)

    def resolve(self, spec: SweepSpec, mode: SweepMode) -> Strategy:
        return RestartBoundRace() if mode.restart_bound else self

    def first_trials(self, spec: SweepSpec) -> list[PlannedTrial]:
        configs = spec.all_configs()
        return plan_trials(configs, spec.min_repeats, spec.order, spec.seed, spec.passes_per_start)

    def planner(
        self, spec: SweepSpec, store: Store, store_path: Path, sweep_id: int, mode: SweepMode
    ) -> Planner | None:
        return RacePlanner(spec, store, sweep_id)

    def estimates(self, spec: SweepSpec, costs: TrialCosts, mode: SweepMode) -> dict[str, Estimate]:
        return race_cases(spec, costs, len(spec.all_configs()))

    def later(self, spec: SweepSpec) -> str:
        return "; later passes are planned one by one from the results (survivors + baseline)"

    def blocked(self, spec: SweepSpec, sweep: SweepRow) -> bool:
        return spec.order == "interleaved"

    def context(
        self, store: Store, sweep: SweepRow, spec: SweepSpec, mode: SweepMode
    ) -> SweepContext:
        configs = sweep_configs(store, sweep["id"])
        state = RacePlanner(spec, store, sweep["id"], configs).state()
        return race_context(state, spec.objective)

    def eta_more(
        self,
        spec: SweepSpec,
        summary: ReportSummary | None,
        per_trial: float,
        left: int,
        total: int,
    ) -> str:
        return "" if summary is None else race_more(spec, summary, per_trial, left, total)


__all__ = ["Race"]
