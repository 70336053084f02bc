"""A race run from the store: replay the finished passes, plan the next one.

    planner = RacePlanner(spec, store, sweep_id, configs)
    state = planner.state()          # RaceState from the stored trials (pure replay)
    rows = planner.next_pass()       # the next pass's trials, added to the store; [] = stop

Nothing is kept in memory between calls: a race killed at any moment and
resumed plans exactly the passes the uninterrupted one would have (the
decisions depend only on the stored, finished passes). See
docs/sweeps.md "Sweep".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ddtune.records import SweepContext
from ddtune.sweep.plan.estimate import Estimate, TrialCosts, format_duration, race_estimates
from ddtune.sweep.plan.passes import OBJECTIVE_METRICS, pass_results
from ddtune.sweep.plan.race_rules import RaceSettings, RaceState, replay
from ddtune.sweep.plan.trial_order import plan_block
from ddtune.sweep.spec.parse import Config, SweepSpec
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.records import trial_records
from ddtune.sweep.store.rows import TrialRow

if TYPE_CHECKING:
    from ddtune.report.result import ReportSummary

ALPHA = 0.05


def race_settings(spec: SweepSpec) -> RaceSettings:
    """The spec's race in blocks (`passes_per_start` passes per block)."""
    k = spec.passes_per_start
    return RaceSettings(
        min_passes=max(2, spec.min_repeats // k),
        max_passes=max(2, spec.repeats // k),
        tolerance=spec.tolerance,
        alpha=ALPHA,
        max_trials=None if spec.max_trials is None else spec.max_trials // k,
        max_hours=spec.max_hours,
    )


class RacePlanner:
    def __init__(
        self,
        spec: SweepSpec,
        store: Store,
        sweep_id: int,
        configs: Sequence[tuple[Config, bool]] | None = None,
    ) -> None:
        self.spec, self.store, self.sweep_id = spec, store, sweep_id
        self.configs = list(configs if configs is not None else spec.all_configs())
        self.settings = race_settings(spec)

    def state(self) -> RaceState:
        records = trial_records(self.store, self.sweep_id)
        passes = pass_results(
            records,
            self.spec.objective,
            self.spec.passes_per_start,
            self.store.trial_seconds(self.sweep_id),
        )
        labels = [config.label() for config, _ in self.configs]
        baseline = next((c.label() for c, is_base in self.configs if is_base), None)
        return replay(labels, baseline, passes, self.settings)

    def next_batch(self) -> list[TrialRow]:
        """The race's unfinished trials (a resumed pass), else the next pass ([] = stopped)."""
        unfinished = self.store.trials(self.sweep_id, ("pending", "interrupted"))
        return unfinished or self.next_pass()

    def outcome(self) -> str:
        state = self.state()
        left = ", ".join(
            f"{e.label} (pass {e.at_pass}, {e.reason})" for e in state.eliminated.values()
        )
        return (
            f"race: {state.passes_done} pass(es), stopped: {state.stop or 'not yet'}; "
            f"still in: {', '.join(state.alive) or 'none'}; left: {left or 'none'}"
        )

    def next_pass(self) -> list[TrialRow]:
        """Add the next pass to the store and return its rows; [] when the race stopped.

        Also [] while the current pass has unfinished trials (they run first).
        """
        if self.store.trials(self.sweep_id, ("pending", "running", "interrupted")):
            return []
        state = self.state()
        if state.stop is not None:
            return []
        keep = set(state.scheduled())
        configs = [(c, b) for c, b in self.configs if c.label() in keep]
        plan = plan_block(
            configs,
            state.passes_done + 1,
            self.spec.seed,
            self.spec.passes_per_start,
            self.store.next_order_index(self.sweep_id),
        )
        return self.store.add_trials(self.sweep_id, plan)


def race_context(state: RaceState, objective: str) -> SweepContext:
    """What the report says about a race: passes, stop reason, who left when and why."""
    exits = list(state.eliminated.values())
    return SweepContext("race", objective, state.passes_done, state.stop, exits)


def sweep_configs(store: Store, sweep_id: int) -> list[tuple[Config, bool]]:
    """The distinct configs of a sweep's trials, in run order of their first trial."""
    seen: dict[str, tuple[Config, bool]] = {}
    for row in store.trials(sweep_id):
        seen.setdefault(row["label"], (store.trial_config(row), bool(row["is_baseline"])))
    return list(seen.values())


def race_cases(spec: SweepSpec, costs: TrialCosts, configs: int) -> dict[str, Estimate]:
    """A race of `configs` configs: its best case (it decides at `min_repeats`), its worst."""
    k = spec.passes_per_start
    best, worst = race_estimates(
        configs, spec.min_repeats // k, spec.repeats // k, costs, k, spec.max_trials, spec.max_hours
    )
    return {"race, best case": best, "race, worst case": worst}


def race_more(
    spec: SweepSpec, summary: ReportSummary, per_trial: float, left: int, planned: int
) -> str:
    """The most a race can still add: survivors x passes to its limit, within its budgets."""
    context, settings = summary.context, race_settings(spec)
    if context.stop is not None:
        return "; the race has stopped"
    alive = len(summary.configs) - len(context.exits)
    passes_left = max(settings.max_passes - context.passes - (1 if left else 0), 0)
    trials = alive * passes_left * spec.passes_per_start
    if spec.max_trials is not None:
        trials = min(trials, max(spec.max_trials - planned, 0))
    if spec.max_hours is not None:
        trials = min(trials, int(max(spec.max_hours * 3600 - per_trial * planned, 0) / per_trial))
    return (
        f"; then at most {trials} more trial(s) (~{format_duration(per_trial * trials)}) "
        "if the race runs to its limits (it stops as soon as it decides)"
    )


__all__ = [
    "OBJECTIVE_METRICS",
    "RacePlanner",
    "race_cases",
    "race_context",
    "race_more",
    "race_settings",
    "sweep_configs",
]
