"""Strategy "optuna": a model-based search over `[space]` ranges, then a race over its best.

    search = Optuna(spec, mode)
    rows = search.next_batch(store, id)   # one proposed trial, or the confirm race's next pass

Search trial n (Optuna's trial number) is the store trial of the sweep with
`repeat = n + 1`; its objective (or FAIL for a failed trial) is told to the study
before the next ask, constrained on the pass rate (infeasible when significantly
below the best so far by Fisher). The study is `<store>.optuna.sqlite` next to
the store (`plan/study.py`), so a killed search resumes: a trial asked but not
told is run (or told) first. After `n_trials` (or `max_trials` / `max_hours`),
the best `confirm_top` configs and the baseline race in the sweep
`<name>.confirm`. Optuna is imported on first use. See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddtune.records import SweepContext, TrialRecord
from ddtune.stats.intervals import fisher_exact_two_sided
from ddtune.sweep.plan.costs import RACE_ALPHA, Estimate, TrialCosts, estimate, race_span
from ddtune.sweep.plan.fold import FINISHED, Finished
from ddtune.sweep.plan.passes import objective_value
from ddtune.sweep.plan.strategies.base import Strategy, in_passes, refuse_start_spread
from ddtune.sweep.plan.strategies.race import Race
from ddtune.sweep.plan.trial_order import plan_trials
from ddtune.sweep.spec.checks import fail, passes_divide
from ddtune.sweep.spec.parse import Config, SweepSpec
from ddtune.sweep.spec.schema import SpecDocument
from ddtune.sweep.store.db import PlannedTrial, Store
from ddtune.sweep.store.modes import SweepMode
from ddtune.sweep.store.rows import SweepRow, TrialRow

if TYPE_CHECKING:
    from ddtune.report.result import ReportSummary
    from ddtune.sweep.plan.study import Proposal, Search

CONFIRM_SUFFIX = ".confirm"


class Optuna(Strategy):
    name = "optuna"
    searches = True
    later = "; the search proposes one trial at a time, then a race confirms the best"

    @classmethod
    def check(cls, doc: SpecDocument) -> None:
        super().check(doc)
        repeats = cls.repeats(doc.sweep)
        in_passes(doc, cls.name, repeats)
        if doc.configs:
            fail(
                "configs",
                'strategy = "optuna" searches [space]; remove [[configs]] '
                "(the baseline goes in sweep.baseline)",
            )
        if doc.space is None:
            fail("space", 'strategy = "optuna" needs a [space] with ranges or lists to search')
        passes_divide(doc, [("repeats", repeats), ("min_repeats", doc.sweep.min_repeats)])
        refuse_start_spread(doc, "a search (its confirming race runs pass by pass)")

    def __init__(self, spec: SweepSpec, mode: SweepMode) -> None:
        super().__init__(spec, mode)
        assert spec.optuna is not None and spec.search is not None  # checked by parse_spec
        self.optuna, self.space = spec.optuna, spec.search
        self.race: Race | None = None  # the confirming race, once the search is done
        self._search: Search | None = None
        self._finished: Finished | None = None

    def search(self, store: Store) -> Search:
        """The study next to `store` (`plan/study.py`: imports optuna)."""
        if self._search is None:
            from ddtune.sweep.plan.study import Search

            seed = self.spec.seed if self.optuna.seed is None else self.optuna.seed
            path = store.path.with_name(store.path.stem + ".optuna.sqlite")
            self._search = Search(self.space, path, study_name=self.spec.name, seed=seed)
        return self._search

    def next_batch(self, store: Store, sweep_id: int) -> list[TrialRow]:
        search = self.search(store)
        while self.race is None:
            self._tell_finished(store, sweep_id)
            if self._search_done(store, sweep_id):
                self.race = self._confirm_race(store)
                break
            proposal = search.ask()
            row = _trial_of(store, sweep_id, proposal)
            if row["status"] not in FINISHED:
                return [row]
        confirm = store.sweep_id(self.spec.name + CONFIRM_SUFFIX)
        assert confirm is not None
        return self.race.next_batch(store, confirm)

    def outcome(self) -> str:
        told = 0 if self._search is None else len(self._search.completed())
        text = f"search: {told} completed trial(s) of {self.optuna.n_trials}"
        return text if self.race is None else f"{text}; confirm {self.race.outcome()}"

    def _tell_finished(self, store: Store, sweep_id: int) -> None:
        """Tell the study every asked trial whose store trial has finished."""
        search = self.search(store)
        if self._finished is None or self._finished.sweep_id != sweep_id:
            self._finished = Finished(store, sweep_id)
        self._finished.update()
        records = {r.repeat: r for r in self._finished.records}
        for proposal in search.running():
            record = records.get(proposal.number + 1)
            if record is not None and record.status in FINISHED:
                value = objective_value(record, self.spec.objective)
                search.tell(proposal.number, value, pass_rate_constraint(record, records))

    def _search_done(self, store: Store, sweep_id: int) -> bool:
        spec, optuna = self.spec, self.optuna
        if self.search(store).running():
            return False
        finished = len(store.trials(sweep_id, FINISHED))
        if finished >= optuna.n_trials:
            return True
        if spec.max_trials is not None and finished >= spec.max_trials:
            return True
        spent = sum(store.trial_seconds(sweep_id).values())
        return spec.max_hours is not None and spent >= spec.max_hours * 3600

    def _confirm_race(self, store: Store) -> Race:
        """The best `confirm_top` configs and the baseline, raced in `<name>.confirm`."""
        spec, optuna = self.spec, self.optuna
        configs = [(c, True) for c in [spec.baseline] if c is not None]
        for proposal in self.search(store).best(optuna.confirm_top):
            config = Config(proposal.params, tuple(sorted(proposal.vars.items())))
            if all(config != c for c, _ in configs):
                configs.append((config, False))
        first = plan_trials(
            configs, spec.min_repeats, "interleaved", spec.seed, spec.passes_per_start
        )
        name = spec.name + CONFIRM_SUFFIX
        store.open_sweep(name, spec.text, spec.hash, first, spec.base_dir)
        return Race(spec, self.mode, configs)

    def estimates(self, costs: TrialCosts) -> dict[str, Estimate]:
        """The search's trials, then the race over its best configs (and the baseline)."""
        confirmed = self.optuna.confirm_top + (1 if self.spec.baseline else 0)
        confirm = race_span(self.spec, costs, confirmed).cases("confirm race")
        return {"search": estimate(self.optuna.n_trials, costs)} | confirm

    def how_it_runs(self) -> list[str]:
        spec, optuna = self.spec, self.optuna
        base = " and the baseline" if spec.baseline is not None else ""
        return [
            "A search: Optuna proposes one config at a time from the [space] ranges and the "
            f"results so far, up to {optuna.n_trials} trials, each a start and a bench of its "
            "own.",
            f"Then its best {optuna.confirm_top}{base} race pass by pass to confirm the answer "
            f"(sweep {spec.name}{CONFIRM_SUFFIX} in the store).",
        ]

    def blocked(self, sweep: SweepRow) -> bool:
        """Search trials are one per proposal (Welch); the confirming race is blocked."""
        return self.spec.order == "interleaved" and _confirms(sweep)

    def context(self, store: Store, sweep: SweepRow) -> SweepContext:
        if _confirms(sweep):
            context = Race(self.spec, self.mode).context(store, sweep)
            context.notes.append(
                f"Confirmation race over the best configs of the Optuna search ({self.spec.name})."
            )
            return context
        note = (
            "Optuna search trials, one per proposal (not blocked: the analysis is Welch); the "
            f"race over the best configs is sweep {sweep['name']}{CONFIRM_SUFFIX} in this store."
        )
        return SweepContext("optuna", self.spec.objective, notes=[note])

    def eta_more(
        self, summary: ReportSummary | None, per_trial: float, left: int, total: int
    ) -> str:
        return "; the search proposes more trials until its budget is spent"


def _trial_of(store: Store, sweep_id: int, proposal: Proposal) -> TrialRow:
    """The store trial of an Optuna trial, created on the first ask."""
    for row in store.trials(sweep_id):
        if row["repeat"] == proposal.number + 1:
            return row
    config = Config(proposal.params, tuple(sorted(proposal.vars.items())))
    index = store.next_order_index(sweep_id)
    planned = PlannedTrial(index, config, proposal.number + 1, False)
    return store.add_trials(sweep_id, [planned])[0]


def _confirms(sweep: SweepRow) -> bool:
    """Is this the race confirming a search's best configs (`<name>.confirm`)?"""
    return sweep["name"].endswith(CONFIRM_SUFFIX)


def pass_rate_constraint(record: TrialRecord, records: dict[int, TrialRecord]) -> float | None:
    """alpha - p when the trial's pass rate is below the best so far by Fisher (> 0: infeasible).

    None when the trial measured no pass rate. The best is the highest pass
    rate among the search's done trials at the time of the tell.
    """
    counts = record.coding
    if counts is None:
        return None
    measured = [c for r in records.values() if (c := r.coding) is not None]
    best = max(measured, key=lambda c: (c[0] / c[1], c[1]))
    if counts[0] / counts[1] >= best[0] / best[1]:
        return -RACE_ALPHA
    return RACE_ALPHA - fisher_exact_two_sided(*counts, *best)


__all__ = ["CONFIRM_SUFFIX", "Optuna", "pass_rate_constraint"]
