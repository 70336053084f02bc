"""What every strategy is: the `Strategy` base class, with the defaults (as Optuna's BaseSampler).

A strategy owns its rules and, bound to one sweep, its plan:

    rules (class level, read when the spec is parsed: `spec/checks.StrategyRules`)
        searches        [space] is searched (ranges), not crossed into a grid
        repeats(sweep)  the most passes when `repeats` is not written
        check(doc)      refuse settings it would ignore or cannot honour
    the mode (class level, for a new sweep; the store keeps it: `store/modes.py`)
        choose_mode(spec, costs)   restart-bound or not, and why
        runs_as(mode)              the class that runs in that mode (a race may be restart-bound)
    bound to one sweep: `Strategy(spec, mode)` (by `prepare`, once per command)
        first_trials()             the trials known before any result
        next_batch(store, id)      the next trials from the finished ones, folded as they
                                   land (`fold.py`); [] when it is done
        bench_for(trial, matrix)   what a trial's bench measures (default: `[bench]` as written)
        outcome()                  how it ended, in words
        estimates(costs)           named cases of trials, restarts and seconds
        span(costs, capped)        its best, median (where known) and worst case, capped
                                   at max_trials / max_hours or not (`sweep plan`'s limits)
        how_it_runs()              how it spends its starts, in the user's words
        blocked(sweep) / context(store, sweep) / eta_more(...): the report and the live page

A subclass overrides what differs. A new strategy is one module beside this one
and one line of the table in `strategies/__init__.py`; nothing else asks which
strategy a sweep runs.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, ClassVar

from ddtune.bench.matrix import BenchMatrix
from ddtune.records import SweepContext
from ddtune.sweep.plan.costs import Estimate, Span, TrialCosts, race_more
from ddtune.sweep.spec.checks import fail
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.spec.schema import SpecDocument, SweepTable
from ddtune.sweep.store.db import PlannedTrial, Store
from ddtune.sweep.store.modes import SweepMode
from ddtune.sweep.store.rows import SweepRow, TrialRow
from ddtune.trace.forecast import Forecast

if TYPE_CHECKING:
    from ddtune.report.result import ReportSummary

RACE_REPEATS = 10  # the most passes of a race or search when `repeats` is not written
RACE_ONLY = ("min_repeats", "max_trials", "max_hours")  # keys that shape a race


class Strategy:
    """One way to run a sweep (module docstring); this class holds the defaults."""

    name: ClassVar[str]  # the word `[sweep] strategy` spells it with
    searches: ClassVar[bool] = False
    races: ClassVar[bool] = False  # a race decides: the report shows its passes and exits
    later: ClassVar[str] = ""  # `sweep plan`: how trials after the planned ones come
    forecast: Forecast | None = None  # what it predicts from, where it does (strategy predict)
    from_outputs: bool = False  # ... or: the baseline's first bench will predict (n-gram)

    # --- rules, read when the spec is parsed ------------------------------------------

    @classmethod
    def repeats(cls, sweep: SweepTable) -> int:
        if "repeats" in sweep.model_fields_set:
            return sweep.repeats
        return max(RACE_REPEATS, sweep.min_repeats)

    @classmethod
    def check(cls, doc: SpecDocument) -> None:
        """No search settings unless it searches; `restart_bound` pinned only by a race."""
        if not cls.searches:
            refuse_search_settings(doc)
        sweep = doc.sweep
        pinned = sweep.restart_bound != "auto"  # "auto" (the default) suits every strategy
        if "restart_bound" in sweep.model_fields_set and pinned:
            fail("sweep.restart_bound", 'only applies to strategy = "race" (or write "auto")')

    # --- the mode of a new sweep ----------------------------------------------------------

    @classmethod
    def choose_mode(cls, spec: SweepSpec, costs: TrialCosts | None) -> SweepMode:
        return SweepMode(False, f"strategy {cls.name}")

    @classmethod
    def runs_as(cls, spec: SweepSpec, mode: SweepMode) -> type[Strategy]:
        return cls

    @classmethod
    def fixed_at_creation(cls, spec: SweepSpec, mode: SweepMode, store: Store) -> SweepMode:
        """What a new sweep in `store` fixes with its mode from the store's earlier sweeps
        (stored with it, so a resume replays it): nothing by default."""
        return mode

    # --- bound to one sweep ---------------------------------------------------------------

    def __init__(self, spec: SweepSpec, mode: SweepMode) -> None:
        self.spec, self.mode = spec, mode  # the spec as written
        self.run_spec = run_spec(spec, mode)

    def first_trials(self) -> list[PlannedTrial]:
        return []

    def next_batch(self, store: Store, sweep_id: int) -> list[TrialRow]:
        return []

    def bench_for(self, trial: TrialRow, matrix: BenchMatrix) -> BenchMatrix:
        """The bench `trial` runs: `[bench]` as written, unless the strategy needs more of it."""
        return matrix

    @property
    def plans_later(self) -> bool:
        """Does it add trials from the results (`next_batch`)?"""
        return type(self).next_batch is not Strategy.next_batch

    def outcome(self) -> str:
        return ""

    def estimates(self, costs: TrialCosts) -> dict[str, Estimate]:
        return {}

    def span(self, costs: TrialCosts, capped: bool = True) -> Span | None:
        """Its best, median and worst case at `costs`, within the spec's `max_trials` and
        `max_hours` (`capped`) or without them; None where it cannot tell (a search)."""
        return None

    def how_it_runs(self) -> list[str]:
        """How it spends its starts, in sentences a user reads before the first stop."""
        return []

    def blocked(self, sweep: SweepRow) -> bool:
        """Does the report analyse this sweep's passes as blocks (configs measured together)?"""
        return self.spec.order == "interleaved"

    def context(self, store: Store, sweep: SweepRow) -> SweepContext:
        """The report's account of how the sweep ran."""
        return SweepContext(self.name, self.spec.objective)

    def eta_more(
        self, summary: ReportSummary | None, per_trial: float, left: int, total: int
    ) -> str:
        """The live page: what may come after the trials planned now ("" when nothing): a
        race's most trials to its limits, within its budgets."""
        if summary is None or not self.races:
            return ""
        return race_more(self.spec, summary, per_trial, left, total)


def run_spec(spec: SweepSpec, mode: SweepMode) -> SweepSpec:
    """The spec as it runs: restart-bound, one start serves up to `most_benches`."""
    if not mode.restart_bound:
        return spec
    return dataclasses.replace(spec, passes_per_start=mode.most_benches)


def start_words(spec: SweepSpec) -> str:
    """What one start of a config is, for this service."""
    if spec.service.control == "hot":
        return "the server takes the config in place (a hot reconfigure, no restart)"
    return "the service is stopped, started with the config and proven to serve it"


def order_words(spec: SweepSpec) -> str:
    """How the trials of a pass are ordered (`[sweep] order`), and what that buys."""
    if spec.interleave == "request":
        return (
            "Each pass runs on one server, its configs taking turns request by request "
            "(hot reconfigures), so every config sees the same moments of the machine."
        )
    if spec.order == "sequential":
        return (
            'Config by config (order = "sequential"): a slow stretch of the machine lands '
            "on whole configs, so the report compares them as independent samples."
        )
    if spec.order == "random":
        return f'All trials in one shuffle (order = "random", seed {spec.seed}).'
    return (
        f"Each pass runs every config once, in a shuffle of its own (seed {spec.seed}); "
        "configs are compared within a pass, so a slow stretch of the machine hits a "
        "pass's configs alike."
    )


def bench_words(spec: SweepSpec) -> list[str]:
    """How a pass's configs get their starts and benches (none with request turns)."""
    if spec.interleave == "request":
        return []
    k = spec.passes_per_start
    if k == 1:
        return [f"Every trial gets a start of its own: {start_words(spec)}, then one bench."]
    return [
        f"A start serves {k} consecutive passes of its config (passes_per_start = {k}): "
        f"{start_words(spec)}, then {k} benches; benches of one start share its state."
    ]


def refuse_search_settings(doc: SpecDocument) -> None:
    """`[optuna]` and `{low, high}` ranges belong to a search."""
    if doc.optuna is not None:
        fail("optuna", 'is only read with strategy = "optuna"; remove it or set the strategy')
    for key in doc.space.ranges() if doc.space is not None else {}:
        fail(
            f"space.{key}",
            'a {low, high} range needs strategy = "optuna"; list the values for a grid or a race',
        )


def refuse_start_spread(doc: SpecDocument, why: str) -> None:
    """`[sweep] start_spread` is read by a restart-bound race only (strategy race or predict)."""
    if doc.sweep.start_spread is not None:
        fail(
            "sweep.start_spread",
            f"is read by a restart-bound race only (strategy race or predict), not {why}; "
            "remove it",
        )


def in_passes(doc: SpecDocument, name: str, repeats: int) -> None:
    """A race or search runs interleaved passes, at least `min_repeats` of them."""
    sweep = doc.sweep
    if sweep.order != "interleaved":
        fail("sweep.order", f'strategy = "{name}" runs interleaved passes; remove order')
    if sweep.min_repeats > repeats:
        fail(
            "sweep.min_repeats",
            f"({sweep.min_repeats}) is above sweep.repeats ({sweep.repeats}), the most "
            "passes a race runs",
        )


__all__ = [
    "RACE_ONLY",
    "RACE_REPEATS",
    "Strategy",
    "bench_words",
    "in_passes",
    "order_words",
    "refuse_search_settings",
    "refuse_start_spread",
    "run_spec",
    "start_words",
]
