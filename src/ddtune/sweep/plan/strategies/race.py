"""Strategy "race" (F-Race): every config's first passes, then pass by pass only the
configs not yet shown worse (and the baseline), until the race decides or its limits.

    race = Race(spec, mode)
    race.first_trials()                 # the first `min_repeats` passes
    rows = race.next_batch(store, id)   # the next pass from the finished ones; [] = stopped
    race.state()                        # the `RaceState` after the passes folded so far

The rules are `races/by_pass.py`'s (pure); the decisions depend only on the
stored, finished passes, so a race killed at any moment and resumed plans
exactly the passes the uninterrupted one would have. Restart-bound or not is
chosen once for a new sweep (`race_mode`, `restart_bound.py`); restart-bound,
the race runs as `RestartBoundRace`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ddtune.records import SweepContext
from ddtune.sweep.plan.costs import (
    Estimate,
    Span,
    TrialCosts,
    race_settings,
    race_span,
    uncapped,
)
from ddtune.sweep.plan.fold import Finished
from ddtune.sweep.plan.passes import pass_results
from ddtune.sweep.plan.races.by_pass import RaceState, replay
from ddtune.sweep.plan.strategies.base import (
    Strategy,
    bench_words,
    in_passes,
    order_words,
    refuse_search_settings,
    refuse_start_spread,
)
from ddtune.sweep.plan.strategies.restart_bound import (
    RestartBoundRace,
    contenders_of,
    race_mode,
)
from ddtune.sweep.plan.trial_order import plan_block, plan_trials
from ddtune.sweep.spec.checks import passes_divide
from ddtune.sweep.spec.parse import Config, SweepSpec
from ddtune.sweep.spec.schema import SpecDocument
from ddtune.sweep.store.db import PlannedTrial, Store
from ddtune.sweep.store.modes import SweepMode
from ddtune.sweep.store.rows import SweepRow, TrialRow

Configs = Sequence[tuple[Config, bool]]  # (config, is_baseline)


class Race(Strategy):
    name = "race"
    races = True
    later = "; later passes are planned one by one from the results (survivors + baseline)"

    @classmethod
    def check(cls, doc: SpecDocument) -> None:
        refuse_search_settings(doc)  # a race may pin `restart_bound`
        repeats = cls.repeats(doc.sweep)
        in_passes(doc, cls.name, repeats)
        if doc.sweep.passes_per_start > 1 and doc.sweep.restart_bound is not True:
            passes_divide(doc, [("repeats", repeats), ("min_repeats", doc.sweep.min_repeats)])
        if doc.sweep.restart_bound is False:
            refuse_start_spread(doc, "a race pinned to pass by pass (restart_bound = false)")

    @classmethod
    def choose_mode(cls, spec: SweepSpec, costs: TrialCosts | None) -> SweepMode:
        return race_mode(spec, costs)

    @classmethod
    def runs_as(cls, spec: SweepSpec, mode: SweepMode) -> type[Strategy]:
        return RestartBoundRace if mode.restart_bound else cls

    def __init__(self, spec: SweepSpec, mode: SweepMode, configs: Configs | None = None) -> None:
        super().__init__(spec, mode)
        self.configs = list(configs if configs is not None else spec.all_configs())
        self.settings = race_settings(spec)
        self._finished: Finished | None = None
        self._last: RaceState | None = None  # the state `state(store, sweep_id)` replayed last

    def first_trials(self) -> list[PlannedTrial]:
        spec = self.spec
        return plan_trials(
            self.configs, spec.min_repeats, spec.order, spec.seed, spec.passes_per_start
        )

    def next_batch(self, store: Store, sweep_id: int) -> list[TrialRow]:
        """The race's unfinished trials (a resumed pass), else the next pass ([] = stopped);
        [] too while a pass still runs (its trials run first)."""
        unfinished = store.trials(sweep_id, ("pending", "interrupted"))
        if unfinished or store.trials(sweep_id, ("running",)):
            return unfinished
        state = self.state(store, sweep_id)
        if state.stop is not None:
            return []
        keep = set(state.scheduled())
        configs = [(c, b) for c, b in self.configs if c.label() in keep]
        plan = plan_block(
            configs,
            state.passes_done + 1,
            self.spec.seed,
            self.spec.passes_per_start,
            store.next_order_index(sweep_id),
        )
        return store.add_trials(sweep_id, plan)

    def state(self, store: Store | None = None, sweep_id: int | None = None) -> RaceState:
        """The race after its finished passes: those of `store`'s sweep `sweep_id` when given;
        else the state replayed last (their stored seconds counted, so `max_hours` holds)."""
        if store is None or sweep_id is None:
            if self._last is not None:
                return self._last
            return replay(*contenders_of(self.configs), [], self.settings)
        if self._finished is None or self._finished.sweep_id != sweep_id:
            self._finished = Finished(store, sweep_id)
        self._finished.update()
        seconds = store.trial_seconds(sweep_id)
        passes = pass_results(
            self._finished.records, self.spec.objective, self.spec.passes_per_start, seconds
        )
        self._last = replay(*contenders_of(self.configs), passes, self.settings)
        return self._last

    def outcome(self) -> str:
        state = self.state()
        left = ", ".join(
            f"{e.label} (pass {e.at_pass}, {e.reason})" for e in state.eliminated.values()
        )
        return (
            f"race: {state.passes_done} pass(es), stopped: {state.stop or 'not yet'}; "
            f"still in: {', '.join(state.alive) or 'none'}; left: {left or 'none'}"
        )

    def estimates(self, costs: TrialCosts) -> dict[str, Estimate]:
        return race_span(self.spec, costs, len(self.configs)).cases("race")

    def span(self, costs: TrialCosts, capped: bool = True) -> Span:
        return race_span(self.spec if capped else uncapped(self.spec), costs, len(self.configs))

    def how_it_runs(self) -> list[str]:
        spec, settings = self.spec, self.settings
        baseline = ", and the baseline," if spec.baseline is not None else ""
        first = settings.min_passes * spec.passes_per_start
        return [
            f"A race, pass by pass ({self.mode.reason}): each pass runs every config still "
            f"in the race{baseline} once.",
            order_words(spec),
            *bench_words(spec),
            f"The first {first} passes run every config; after each later pass a config "
            "clearly slower than the leader leaves (a paired test within passes, corrected "
            "for the number of comparisons).",
            f"It stops when one config is left, when the rest are within {spec.tolerance:.0%} "
            f"of the leader (a tie), or after {spec.repeats} passes.",
        ]

    def context(self, store: Store, sweep: SweepRow) -> SweepContext:
        """Replayed over the sweep's own configs, in the order its trials first ran."""
        ran = Race(self.spec, self.mode, sweep_configs(store, sweep["id"]))
        state = ran.state(store, sweep["id"])
        exits = list(state.eliminated.values())
        objective = self.spec.objective
        return SweepContext("race", objective, state.passes_done, state.stop, exits, race=True)


def sweep_configs(store: Store, sweep_id: int) -> list[tuple[Config, bool]]:
    """The distinct configs of a sweep's trials, in run order of their first trial."""
    seen: dict[str, tuple[Config, bool]] = {}
    for row in store.trials(sweep_id):
        seen.setdefault(row["label"], (store.trial_config(row), bool(row["is_baseline"])))
    return list(seen.values())


__all__ = ["Race", "sweep_configs"]
