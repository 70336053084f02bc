"""The restart-bound race: a race decided start by start, one bench at a time.

    mode = race_mode(spec, costs)          # how a new race runs: restart-bound or not, and why
    race = RestartBoundRace(spec, mode)    # what a race runs as when restart-bound
    rows = race.next_batch(store, id)      # the next trial from the finished ones; [] = stopped

The mode, how a trial is stored and what each finished one carries: docs/sweeps.md
"Restart-bound races"; the rules are `races/by_start.py`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ddtune.errors import UserError
from ddtune.records import SweepContext, TrialRecord
from ddtune.report.summarize import cost_key
from ddtune.stats.mixed import Priors, VariancePrior
from ddtune.sweep.plan.costs import (
    Estimate,
    Span,
    TrialCosts,
    race_span,
    start_race_estimates,
    uncapped,
)
from ddtune.sweep.plan.fold import Finished
from ddtune.sweep.plan.passes import objective_value
from ddtune.sweep.plan.races.by_start import (
    PRIORS,
    FinishedBench,
    StartRace,
    StartSettings,
    prior_benches,
)
from ddtune.sweep.plan.spread import chosen_spread
from ddtune.sweep.plan.strategies.base import Strategy, start_words
from ddtune.sweep.spec.parse import Config, SweepSpec
from ddtune.sweep.store.db import PlannedTrial, Store
from ddtune.sweep.store.modes import SweepMode, trial_times
from ddtune.sweep.store.rows import SweepRow, TrialRow


class RestartBoundRace(Strategy):
    """What strategy "race" (and "predict") runs as when restart-bound (module docstring)."""

    name = "restart-bound race"
    races = True
    later = (
        "; a restart-bound race plans one bench at a time from the results (pass 1 starts every "
        "config once, later passes only the configs still in the race)"
    )

    def __init__(self, spec: SweepSpec, mode: SweepMode) -> None:
        super().__init__(spec, mode)
        self.configs = spec.all_configs()
        self.settings = start_settings(spec, mode)
        self._finished: Finished | None = None
        self._race: StartRace | None = None

    def next_batch(self, store: Store, sweep_id: int) -> list[TrialRow]:
        """The race's unfinished trial (a resumed one), else the next one ([] = stopped)."""
        unfinished = store.trials(sweep_id, ("pending", "interrupted"))
        if unfinished or store.trials(sweep_id, ("running",)):
            return unfinished
        step = self.state(store, sweep_id).next()
        if step is None:
            return []
        config, is_baseline = next((c, b) for c, b in self.configs if c.label() == step.label)
        repeat = (step.start - 1) * self.settings.most_benches + step.bench
        index = store.next_order_index(sweep_id)
        return store.add_trials(sweep_id, [PlannedTrial(index, config, repeat, is_baseline)])

    def state(self, store: Store | None = None, sweep_id: int | None = None) -> StartRace:
        """The race after the finished trials (of `store`'s sweep `sweep_id` when given: the
        ones finished since the last call are folded in; a reopened one refolds all)."""
        if self._race is None:
            self._race = self._new_race()
        if store is None or sweep_id is None:
            return self._race
        if self._finished is None or self._finished.sweep_id != sweep_id:
            self._finished, self._race = Finished(store, sweep_id), self._new_race()
        new = self._finished.update()
        if new is None:  # a trial folded before was reopened: fold again from the start
            self._race, new = self._new_race(), self._finished.records
        times, seconds = trial_times(store, sweep_id), store.trial_seconds(sweep_id)
        for record in new:
            hours, fresh = times.get(record.trial_id, (0.0, True))
            self._fold(store, self._result(record, hours, fresh, seconds.get(record.trial_id, 0.0)))
        return self._race

    def efforts(self) -> dict[str, tuple[int, int]]:
        """label -> (starts, benches) of each config that started in this sweep."""
        race = self.state()
        return {label: (e.starts, e.benches) for label, e in race.efforts.items() if e.starts}

    def outcome(self) -> str:
        race, efforts = self.state(), self.efforts().values()
        starts, benches = sum(s for s, _ in efforts), sum(b for _, b in efforts)
        left = ", ".join(
            f"{e.label} (pass {e.at_pass}, {e.reason})" for e in race.eliminated.values()
        )
        return (
            f"restart-bound race: {race.pass_no} pass(es), {starts} start(s), {benches} "
            f"bench(es), stopped: {race.stop or 'not yet'}; still in: "
            f"{', '.join(race.alive) or 'none'}; left: {left or 'none'}"
        )

    def estimates(self, costs: TrialCosts) -> dict[str, Estimate]:
        """Its best, expected and worst case, then the pass-by-pass race for comparison."""
        spec = self.spec  # (the pass-by-pass race: a start serves at most every pass)
        by_pass = dataclasses.replace(
            spec, passes_per_start=min(spec.passes_per_start, spec.repeats)
        )
        by_pass_span = race_span(by_pass, costs, len(spec.all_configs()))
        return start_span(spec, costs, self.mode).cases("restart-bound race") | by_pass_span.cases(
            "the pass-by-pass race (restart_bound = false)"
        )

    def span(self, costs: TrialCosts, capped: bool = True) -> Span:
        return start_span(self.spec if capped else uncapped(self.spec), costs, self.mode)

    def how_it_runs(self) -> list[str]:
        spec, most = self.spec, self.settings.most_benches
        return [
            f"Restart-bound ({self.mode.reason}): every config that starts gets its own server "
            f"start ({start_words(spec)}), benched 1 to {most} times as the race sees fit.",
            "Benches within one start are not independent (they share that start's state), "
            "so the race judges configs by their starts and measures the spread between starts.",
            *self.pass_words(),
            f"{self.leave_words()} It stops when one config is left, when the rest are within "
            f"{spec.tolerance:.0%} of the leader (a tie), or after {spec.repeats} passes.",
        ]

    def leave_words(self) -> str:
        """Who may make others leave (`how_it_runs`)."""
        return "Only a leader seen on 2 starts or more makes others leave."

    def pass_words(self) -> list[str]:
        """Who starts in which pass (`how_it_runs`)."""
        return [
            f"Pass 1 starts every config once, in a shuffle (seed {self.spec.seed}); later "
            "passes start again only the configs still close to the leader. A config leaves "
            "as soon as it is clearly behind, even in the middle of its start."
        ]

    def context(self, store: Store, sweep: SweepRow) -> SweepContext:
        """Its verdict, who left when and why, and the starts and benches each config got."""
        race = self.state(store, sweep["id"])
        params = {config.label(): config.params for config, _ in self.configs}
        verdict = race.verdict(lambda label: (cost_key(params[label]), label))
        context = SweepContext("race", self.spec.objective, race.pass_no, race.stop, race=True)
        context.exits = list(race.eliminated.values())
        context.efforts, context.verdict = self.efforts(), verdict
        context.notes.append(f"Restart-bound race ({self.mode.reason}): {_words(race)}")
        return context

    def _new_race(self) -> StartRace:
        return StartRace(*contenders_of(self.configs), self.settings, self.spec.seed)

    def _fold(self, store: Store, result: FinishedBench) -> None:
        assert self._race is not None
        try:
            self._race.add(result)
        except ValueError as exc:
            raise UserError(
                f"{store.path}: sweep {self.spec.name} does not follow its restart-bound "
                f"race ({exc}); resume it with the ddtune that started it, or start afresh "
                "with --store NEW_PATH"
            ) from None

    def _result(
        self, record: TrialRecord, hours: float, fresh: bool, seconds: float
    ) -> FinishedBench:
        start, bench = divmod(record.repeat - 1, self.settings.most_benches)
        return FinishedBench(
            record.label,
            start + 1,
            bench + 1,
            objective_value(record, self.spec.objective),
            record.coding,
            hours,
            seconds,
            fresh,
        )


def contenders_of(configs: Sequence[tuple[Config, bool]]) -> tuple[tuple[str, ...], str | None]:
    """A race's contenders (its configs' labels, in order) and its baseline's label."""
    labels = tuple(config.label() for config, _ in configs)
    return labels, next((c.label() for c, is_base in configs if is_base), None)


def start_settings(spec: SweepSpec, mode: SweepMode) -> StartSettings:
    """The spec's race, restart-bound: repeats = most passes, passes_per_start = most benches."""
    start_s, bench_s = mode.start_s, mode.bench_s
    if start_s is None or bench_s is None:  # pinned on without costs: a start counts as a bench
        start_s = bench_s = 1.0
    spread = chosen_spread(spec.restart_bound.start_spread, mode.spread)
    return StartSettings(
        tolerance=spec.tolerance,
        most_benches=mode.most_benches,
        max_passes=spec.repeats,
        min_passes=min(spec.restart_bound.min_passes, spec.repeats),
        max_trials=spec.max_trials,
        max_hours=spec.max_hours,
        start_s=start_s,
        bench_s=bench_s,
        priors=start_priors(spread.sd),
    )


def start_priors(spread: float | None) -> Priors:
    """The race's priors, with what a start moves a config's level at `spread` where the spec
    states it (`[sweep] start_spread`) or the store's earlier sweeps measured it
    (`spread.py`); worth the prior's own df, so a few second starts still outweigh it."""
    if spread is None:
        return PRIORS
    return dataclasses.replace(PRIORS, start=VariancePrior(spread, PRIORS.start.df))


def start_span(spec: SweepSpec, costs: TrialCosts, mode: SweepMode) -> Span:
    """A restart-bound race's best case, expected (median: a typical landscape) and worst
    case."""
    settings = start_settings(
        spec, dataclasses.replace(mode, start_s=costs.start_s, bench_s=costs.bench_s)
    )
    best, expected, worst = start_race_estimates(
        len(spec.all_configs()),
        costs,
        prior_benches(settings),
        settings.most_benches,
        settings.max_passes,
        (settings.max_trials, settings.max_hours),
    )
    return Span(best, worst, expected)


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


def _words(race: StartRace) -> str:
    """How the race spent its starts, for the report's notes."""
    cut = sum(e.cut for e in race.efforts.values())
    components = race.components
    spread = (
        ""
        if components is None
        else f" Model: {components.start.sd:.1%} between starts ({components.start.df:.0f} df "
        f"with the prior), {components.bench.sd:.1%} between benches of a start, drift "
        f"{components.drift.sd:.1%} per sqrt(hour)."
    )
    return (
        f"each config started once in pass 1, then only the configs still in the race; "
        f"{cut} start(s) stopped early by the sequential test.{spread}"
    )


__all__ = [
    "RestartBoundRace",
    "contenders_of",
    "race_mode",
    "start_priors",
    "start_settings",
    "start_span",
]
