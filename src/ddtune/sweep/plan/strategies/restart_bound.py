"""The restart-bound race: a race decided start by start (`plan/starts.py`), one bench at
a time; the mode (`plan/mode.py`) chooses it for a race whose restarts cost a bench or more,
or `[sweep] restart_bound = true` pins it. It plans nothing ahead: every trial comes from
the results (`plan/start_planner.py`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from ddtune.records import SweepContext
from ddtune.sweep.plan.estimate import Estimate, TrialCosts, start_race_estimates
from ddtune.sweep.plan.mode import race_mode
from ddtune.sweep.plan.race_planner import race_cases, race_more
from ddtune.sweep.plan.strategies.base import Planner, Strategy
from ddtune.sweep.spec.load import SweepSpec
from ddtune.sweep.store.db import PlannedTrial, Store
from ddtune.sweep.store.modes import SweepMode
from ddtune.sweep.store.rows import SweepRow

if TYPE_CHECKING:
    from ddtune.report.result import ReportSummary

RESTART_BOUND_LATER = (
    "; a restart-bound race plans one bench at a time from the results (pass 1 starts every "
    "config once, later passes only the configs still in the race)"
)


class RestartBoundRace:
    name = "restart-bound race"

    def choose_mode(self, spec: SweepSpec, costs: TrialCosts | None) -> SweepMode:
        return race_mode(spec, costs)

    def resolve(self, spec: SweepSpec, mode: SweepMode) -> Strategy:
        return self

    def first_trials(self, spec: SweepSpec) -> list[PlannedTrial]:
        return []

    def planner(
        self, spec: SweepSpec, store: Store, store_path: Path, sweep_id: int, mode: SweepMode
    ) -> Planner | None:
        from ddtune.sweep.plan.start_planner import StartPlanner

        return StartPlanner(spec, store, sweep_id, mode)

    def estimates(self, spec: SweepSpec, costs: TrialCosts, mode: SweepMode) -> dict[str, Estimate]:
        """Its best, expected and worst case, then today's race for comparison."""
        return start_cases(spec, costs, mode) | {
            f"today's race (restart_bound = false), {key.removeprefix('race, ')}": value
            for key, value in race_cases(spec, costs, len(spec.all_configs())).items()
        }

    def later(self, spec: SweepSpec) -> str:
        return RESTART_BOUND_LATER

    def blocked(self, spec: SweepSpec, sweep: SweepRow) -> bool:
        return spec.order == "interleaved"

    def context(
        self, store: Store, sweep: SweepRow, spec: SweepSpec, mode: SweepMode
    ) -> SweepContext:
        from ddtune.sweep.plan.start_planner import StartPlanner

        # the spec's configs: the race's own order
        return StartPlanner(spec, store, sweep["id"], mode).context()

    def eta_more(
        self,
        spec: SweepSpec,
        summary: ReportSummary | None,
        per_trial: float,
        left: int,
        total: int,
    ) -> str:
        return "" if summary is None else race_more(spec, summary, per_trial, left, total)


def start_cases(spec: SweepSpec, costs: TrialCosts, mode: SweepMode) -> dict[str, Estimate]:
    """A restart-bound race's best case, expected (median) and worst case."""
    from ddtune.sweep.plan.start_planner import start_settings
    from ddtune.sweep.plan.starts import prior_benches

    settings = start_settings(
        spec, dataclasses.replace(mode, start_s=costs.start_s, bench_s=costs.bench_s)
    )
    cases = start_race_estimates(
        len(spec.all_configs()),
        costs,
        prior_benches(settings),
        settings.most_benches,
        settings.max_passes,
        (settings.max_trials, settings.max_hours),
    )
    names = ("best case", "expected (median)", "worst case")
    return {f"restart-bound race, {name}": e for name, e in zip(names, cases, strict=True)}


__all__ = ["RESTART_BOUND_LATER", "RestartBoundRace", "start_cases"]
