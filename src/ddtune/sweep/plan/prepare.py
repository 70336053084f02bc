"""A sweep prepared once: the spec → mode → strategy → plan chain, the costs, the forecast.

    sweep = prepare(spec, store)        # store: None when there is none yet (`sweep plan`)
    sweep.plan                          # the trials known before the first one runs
    sweep.strategy.next_batch(store, id)  # what the strategy adds from the results
    print(sweep.estimate_text())        # the mode and why, the costs, the cases

`sweep run|retry|plan|report|watch` each prepare the sweep once and pass the
`Sweep` on whole (the run loop, the live report, the report, the live page);
nothing below them derives the mode, the run spec or the plan again. The mode
is the one stored with the sweep (`store/modes.py`) when the store holds it,
else the strategy's choice from the costs; the strategy is the spec's, bound to
this sweep as it runs in that mode (`Strategy.runs_as`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property

from ddtune.errors import UserError
from ddtune.records import SweepContext
from ddtune.sweep.plan.costs import Estimate, TrialCosts, format_duration, restart_word, trial_costs
from ddtune.sweep.plan.predictions import spec_forecast, trace_binding, traced_context
from ddtune.sweep.plan.spread import chosen_spread, measured_spread
from ddtune.sweep.plan.strategies import STRATEGIES, Strategy
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.store.db import PlannedTrial, Store
from ddtune.sweep.store.modes import SweepMode, read_mode
from ddtune.sweep.store.rows import SweepRow
from ddtune.trace.forecast import Forecast


@dataclass
class Sweep:
    """Everything a command needs to know of how a sweep runs, computed once."""

    spec: SweepSpec  # as written (a restart-bound race's estimates compare with it)
    mode: SweepMode  # restart-bound or not, and why: stored with the sweep, else chosen now
    strategy: Strategy  # the spec's strategy, bound to this sweep as it runs in `mode`
    plan: tuple[PlannedTrial, ...]  # the trials known before the first one runs
    costs: TrialCosts | None  # a start's and a bench's seconds (None: unknown)
    notes: list[str] = field(default_factory=list)  # what the trace's binding could not check

    @property
    def run_spec(self) -> SweepSpec:
        """What runs: restart-bound, one start serves up to `most_benches`."""
        return self.strategy.run_spec

    def estimates(self) -> dict[str, Estimate]:
        """Named cases of trials, restarts and seconds ({} without costs)."""
        return {} if self.costs is None else self.strategy.estimates(self.costs)

    def estimate_text(self) -> str:
        """What `sweep plan` and `sweep run` print first: the costs, the notes, how a race
        runs (its mode) and why, then the strategy's cases."""
        spec, costs = self.spec, self.costs
        head = f"sweep {spec.name}: strategy {spec.strategy}, {len(spec.all_configs())} config(s)"
        if spec.interleave == "request":
            head += ", each pass's configs in turns request by request"
        if costs is None:
            head += " (no cost estimate: set [service] expected_start_s and expected_bench_s)"
        else:
            head += f"; per trial {costs.start_s:.0f} s start + {costs.bench_s:.0f} s bench"
            head += f" ({costs.source})"
        lines = [head, *(f"  note: {note}" for note in self.notes)]
        if self.strategy.races:
            kind = "restart-bound" if self.mode.restart_bound else "pass by pass"
            lines.append(f"  race mode: {kind}: {self.mode.reason}")
        if self.mode.restart_bound:
            lines.append(f"  start spread: {self._spread_words()}")
        for name, e in self.estimates().items():
            lines.append(
                f"  {name}: {e.trials} trial(s), {e.restarts} {restart_word(spec)}, "
                f"~{format_duration(e.seconds)}"
            )
        return "\n".join(lines)

    def start_sd(self, store: Store | None) -> float:
        """What one server start moves a config's level by (relative sd): stated, or what a
        restart-bound race fixed at its creation (its race's, measured or not); else, for a
        sweep not restart-bound, measured on `store`'s sweeps (a grid's own passes count);
        else the race's prior. The round-cost model's predictions take it."""
        stated, measured = self.spec.restart_bound.start_spread, self.mode.spread
        if stated is None and not self.mode.restart_bound and store is not None:
            measured = measured_spread(store, self.spec.objective)
        return chosen_spread(stated, measured).sd

    def _spread_words(self) -> str:
        """What the race takes one server start to move a config's level by, and why."""
        spread = chosen_spread(self.spec.restart_bound.start_spread, self.mode.spread)
        return f"{spread.sd:.1%}".replace(".0%", "%") + f" a start ({spread.source})"

    @cached_property
    def forecast(self) -> Forecast | None:
        """What `[sweep] trace` predicts (read once); None without a trace."""
        if self.strategy.forecast is not None or self.spec.trace is None:
            return self.strategy.forecast
        return spec_forecast(self.spec)

    def context(self, store: Store, sweep: SweepRow) -> SweepContext:
        """The report's account of how the sweep ran: its strategy's, then what a
        `[sweep] trace` predicted beside the measurements."""
        context = self.strategy.context(store, sweep)
        if self.spec.trace is not None and not context.predictions:
            try:
                forecast = self.forecast
            except UserError as exc:
                context.notes.append(f"No predictions: {exc}")
                return context
            assert forecast is not None
            start_sd = self.start_sd(store)
            traced_context(self.run_spec, forecast, store, sweep["id"], context, start_sd)
        return context


def prepare(spec: SweepSpec, store: Store | None, sweep_id: int | None = None) -> Sweep:
    """The sweep of `spec`: the mode stored with sweep `sweep_id` (default: the sweep of the
    spec's name) when `store` holds it, else the one a new sweep gets from the costs."""
    rules = STRATEGIES[spec.strategy]
    costs = trial_costs(spec, store)
    if store is not None and sweep_id is None:
        sweep_id = store.sweep_id(spec.name)
    if store is not None and sweep_id is not None:
        mode = read_mode(store, sweep_id)
    else:
        mode = rules.choose_mode(spec, costs)
        if mode.restart_bound and spec.restart_bound.start_spread is None and store is not None:
            mode = dataclasses.replace(mode, spread=measured_spread(store, spec.objective))
        if store is not None:
            mode = rules.runs_as(spec, mode).fixed_at_creation(spec, mode, store)
    strategy = rules.runs_as(spec, mode)(spec, mode)
    notes = trace_binding(spec) if spec.trace is not None else []
    return Sweep(spec, mode, strategy, tuple(strategy.first_trials()), costs, notes)


def plan_spec(spec: SweepSpec) -> list[PlannedTrial]:
    """The trials known before the first one runs, not restart-bound (grid: all; race: the
    first passes; a search: none, it plans from the results)."""
    return STRATEGIES[spec.strategy](spec, SweepMode(False, "")).first_trials()


__all__ = ["Sweep", "plan_spec", "prepare"]
