"""What every strategy is: the `Strategy` protocol, and the `Planner` it runs from the store.

A strategy decides how a sweep of the spec runs (`choose_mode`: restart-bound or
not, and why), which trials are known before any result (`first_trials`), which
run next from the store (`planner(...).next_batch()`: [] when it is done, then
`outcome()` says how it ended), what it will cost (`estimates`), and describes
itself for `sweep plan` (`later`), the report (`context`) and the live page
(`eta_more`) and whether its report analyses passes as blocks
(`blocked`). Each lives in one module beside this one, registered in
`strategies/__init__.py`'s table.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ddtune.records import SweepContext
from ddtune.sweep.plan.estimate import Estimate, TrialCosts
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.store.db import PlannedTrial, Store
from ddtune.sweep.store.modes import SweepMode
from ddtune.sweep.store.rows import SweepRow, TrialRow

if TYPE_CHECKING:
    from ddtune.report.result import ReportSummary


class Planner(Protocol):
    """The trials a strategy adds while a sweep runs, planned from the store."""

    def next_batch(self) -> list[TrialRow]: ...

    def outcome(self) -> str: ...


class Strategy(Protocol):
    """One way to run a sweep (the spec's `[sweep] strategy`, or what it runs as in a mode)."""

    name: str  # the word `[sweep] strategy` spells it with

    def choose_mode(self, spec: SweepSpec, costs: TrialCosts | None) -> SweepMode:
        """The mode a new sweep of `spec` runs in, and why."""
        ...

    def resolve(self, spec: SweepSpec, mode: SweepMode) -> Strategy:
        """The strategy a sweep of `spec` in `mode` runs (a race may run restart-bound)."""
        ...

    def first_trials(self, spec: SweepSpec) -> list[PlannedTrial]:
        """The trials known before the first one runs."""
        ...

    def planner(
        self, spec: SweepSpec, store: Store, store_path: Path, sweep_id: int, mode: SweepMode
    ) -> Planner | None:
        """What adds trials from the results (None: the first trials are all)."""
        ...

    def estimates(self, spec: SweepSpec, costs: TrialCosts, mode: SweepMode) -> dict[str, Estimate]:
        """Named cases of what the sweep will cost (trials, restarts, seconds)."""
        ...

    def later(self, spec: SweepSpec) -> str:
        """`sweep plan`: how the trials after the planned ones come ("" when none do)."""
        ...

    def blocked(self, spec: SweepSpec, sweep: SweepRow) -> bool:
        """Does the report analyse this sweep's passes as blocks (configs measured together)?"""
        ...

    def context(
        self, store: Store, sweep: SweepRow, spec: SweepSpec, mode: SweepMode
    ) -> SweepContext:
        """The report's account of how the sweep ran (its race history, its notes)."""
        ...

    def eta_more(
        self,
        spec: SweepSpec,
        summary: ReportSummary | None,
        per_trial: float,
        left: int,
        total: int,
    ) -> str:
        """The live page: what may come after the trials planned now ("" when nothing)."""
        ...


__all__ = ["Planner", "Strategy"]
