"""Strategy "optuna": a model-based search over `[space]` ranges, one proposal per trial
(`plan/search_planner.py`), then a race over its best configs in the sweep `<name>.confirm`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ddtune.records import SweepContext
from ddtune.sweep.plan.estimate import Estimate, TrialCosts, estimate
from ddtune.sweep.plan.race_planner import race_cases
from ddtune.sweep.plan.strategies.base import Planner, Strategy
from ddtune.sweep.plan.strategies.race import Race
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.store.db import PlannedTrial, Store
from ddtune.sweep.store.modes import SweepMode
from ddtune.sweep.store.rows import SweepRow

if TYPE_CHECKING:
    from ddtune.report.result import ReportSummary


class Optuna:
    name = "optuna"

    def choose_mode(self, spec: SweepSpec, costs: TrialCosts | None) -> SweepMode:
        return SweepMode(False, f"strategy {self.name}")

    def resolve(self, spec: SweepSpec, mode: SweepMode) -> Strategy:
        return self

    def first_trials(self, spec: SweepSpec) -> list[PlannedTrial]:
        return []  # the search proposes one trial at a time

    def planner(
        self, spec: SweepSpec, store: Store, store_path: Path, sweep_id: int, mode: SweepMode
    ) -> Planner | None:
        from ddtune.sweep.plan.search_planner import SearchPlanner  # imports optuna

        return SearchPlanner(spec, store, store_path, sweep_id)

    def estimates(self, spec: SweepSpec, costs: TrialCosts, mode: SweepMode) -> dict[str, Estimate]:
        """The search's trials, then the race over its best configs (and the baseline)."""
        if spec.optuna is None:
            return race_cases(spec, costs, len(spec.all_configs()))
        confirmed = spec.optuna.confirm_top + (1 if spec.baseline else 0)
        return {"search": estimate(spec.optuna.n_trials, costs)} | {
            f"confirm {key}": value for key, value in race_cases(spec, costs, confirmed).items()
        }

    def later(self, spec: SweepSpec) -> str:
        return "; the search proposes one trial at a time, then a race confirms the best"

    def blocked(self, spec: SweepSpec, sweep: SweepRow) -> bool:
        """Search trials are one per proposal (Welch); the confirming race is blocked."""
        return spec.order == "interleaved" and _confirms(sweep)

    def context(
        self, store: Store, sweep: SweepRow, spec: SweepSpec, mode: SweepMode
    ) -> SweepContext:
        from ddtune.sweep.plan.search_planner import CONFIRM_SUFFIX

        if _confirms(sweep):
            context = Race().context(store, sweep, spec, mode)
            context.notes.append(
                f"Confirmation race over the best configs of the Optuna search ({spec.name})."
            )
            return context
        note = (
            "Optuna search trials, one per proposal (not blocked: the analysis is Welch); the "
            f"race over the best configs is sweep {sweep['name']}{CONFIRM_SUFFIX} in this store."
        )
        return SweepContext("optuna", spec.objective, notes=[note])

    def eta_more(
        self,
        spec: SweepSpec,
        summary: ReportSummary | None,
        per_trial: float,
        left: int,
        total: int,
    ) -> str:
        return "; the search proposes more trials until its budget is spent"


def _confirms(sweep: SweepRow) -> bool:
    """Is this the race confirming a search's best configs (`<name>.confirm`)?"""
    from ddtune.sweep.plan.search_planner import CONFIRM_SUFFIX

    return sweep["name"].endswith(CONFIRM_SUFFIX)


__all__ = ["Optuna"]
