"""The restart-bound race: a race decided start by start (`plan/starts.py`), one bench at
a time. It plans nothing ahead: every trial comes from the results (`plan/start_planner.py`).

    mode = race_mode(spec, costs)   # how a race runs: restart-bound or not, with its reason

`[sweep] restart_bound = true / false` pins it. Left at "auto" (the default),
a race is restart-bound when a restart (stop + start to READY) takes at least
as long as one bench: the trial is then mostly restart, and deciding start by
start spends them where they buy information. Not restart-bound: a hot service
(a reconfigure in place is no restart), configs taking turns by request, the
Ray backend (a start is reused in this process only), or no costs known.
`benchmarks/restart_bound.py` measured the restart-bound race ahead of the
pass-by-pass race down to a restart of 1/10 of a bench on the production
landscape, so the threshold keeps today's behaviour wherever a bench dominates. The mode is
stored with the sweep when it is created (`store/modes.py`); a grid and a
search are never restart-bound, a predicting race always (`predict.py`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from ddtune.records import SweepContext
from ddtune.sweep.plan.estimate import Estimate, TrialCosts, start_race_estimates
from ddtune.sweep.plan.race_planner import race_cases, race_more
from ddtune.sweep.plan.strategies.base import Planner, Strategy
from ddtune.sweep.spec.parse import SweepSpec
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
        """Its best, expected and worst case, then the pass-by-pass race for comparison."""
        return start_cases(spec, costs, mode) | {
            f"the pass-by-pass race (restart_bound = false), {key.removeprefix('race, ')}": value
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


def race_mode(spec: SweepSpec, costs: TrialCosts | None) -> SweepMode:
    """The mode a new race of `spec` runs in, and why (`[sweep] restart_bound`, else auto)."""
    setting = spec.restart_bound.setting
    start_s, bench_s = (costs.start_s, costs.bench_s) if costs is not None else (None, None)
    if setting is not True:
        off = _why_not(spec, costs, setting)
        if off is not None:
            return SweepMode(False, off, start_s, bench_s)
    why = (
        "[sweep] restart_bound = true"
        if setting is True
        else f"auto: a restart ({_s(start_s)}) takes at least one bench ({_s(bench_s)})"
    )
    return SweepMode(True, why, start_s, bench_s, spec.restart_bound.most_benches)


def _why_not(spec: SweepSpec, costs: TrialCosts | None, setting: object) -> str | None:
    """Why "auto" (or false) keeps the pass-by-pass race; None when auto picks restart-bound."""
    if setting is False:
        return "[sweep] restart_bound = false"
    if spec.service.control == "hot":
        return "auto: a hot reconfigure in place is not a restart"
    if spec.interleave == "request":
        return "auto: configs take turns request by request on one server"
    if spec.cluster.backend != "local":
        return "auto: the ray backend does not reuse a start"
    if costs is None:
        return "auto: no costs known (set [service] expected_start_s and expected_bench_s)"
    if costs.start_s < costs.bench_s:
        return (
            f"auto: a restart ({_s(costs.start_s)}) takes less than a bench ({_s(costs.bench_s)})"
        )
    return None


def _s(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds:.0f} s"


__all__ = ["RESTART_BOUND_LATER", "RestartBoundRace", "race_mode", "start_cases"]
