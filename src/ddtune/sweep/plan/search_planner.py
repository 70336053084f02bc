"""`strategy = "optuna"` run from the store: the search, then a race over its best configs.

    planner = SearchPlanner(spec, store, store_path, sweep_id)
    rows = planner.next_batch()     # one proposed trial, or the confirm race's next pass

Search trial n (Optuna's trial number) is the store trial of the sweep with
`repeat = n + 1`; its objective (or FAIL for a failed trial) is told to the
study before the next ask, constrained on the pass rate (infeasible when
significantly below the best so far by Fisher). The study is `<store>.optuna.sqlite` next to the
store, so a killed search resumes: a trial asked but not told is run (or
told) first. After `n_trials` (or `max_trials` / `max_hours`), the best
`confirm_top` configs and the baseline race in the sweep `<name>.confirm`.
See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

from pathlib import Path

from ddtune.records import TrialRecord
from ddtune.stats.intervals import fisher_exact_two_sided
from ddtune.sweep.plan.passes import objective_value
from ddtune.sweep.plan.race_planner import ALPHA, RacePlanner
from ddtune.sweep.plan.study import Proposal, Search
from ddtune.sweep.plan.trial_order import plan_trials
from ddtune.sweep.spec.parse import Config, SweepSpec
from ddtune.sweep.store.db import PlannedTrial, Store
from ddtune.sweep.store.records import trial_records
from ddtune.sweep.store.rows import TrialRow

CONFIRM_SUFFIX = ".confirm"


def study_path(store_path: Path) -> Path:
    return store_path.with_name(store_path.stem + ".optuna.sqlite")


class SearchPlanner:
    def __init__(self, spec: SweepSpec, store: Store, store_path: Path, sweep_id: int) -> None:
        assert spec.search is not None and spec.optuna is not None  # checked by parse_spec
        self.spec, self.store, self.sweep_id, self.optuna = spec, store, sweep_id, spec.optuna
        seed = spec.seed if spec.optuna.seed is None else spec.optuna.seed
        self.search = Search(spec.search, study_path(store_path), study_name=spec.name, seed=seed)
        self.race: RacePlanner | None = None

    def next_batch(self) -> list[TrialRow]:
        while self.race is None:
            self._tell_finished()
            if self._search_done():
                self.race = self._confirm_race()
                break
            proposal = self.search.ask()
            row = self._trial_of(proposal)
            if row["status"] not in ("done", "failed"):
                return [row]
        return self.race.next_batch()

    def outcome(self) -> str:
        told = len(self.search.completed())
        text = f"search: {told} completed trial(s) of {self.optuna.n_trials}"
        return text if self.race is None else f"{text}; confirm {self.race.outcome()}"

    def _tell_finished(self) -> None:
        """Tell the study every asked trial whose store trial has finished."""
        records = {r.repeat: r for r in trial_records(self.store, self.sweep_id)}
        for proposal in self.search.running():
            record = records.get(proposal.number + 1)
            if record is not None and record.status in ("done", "failed"):
                value = objective_value(record, self.spec.objective)
                self.search.tell(proposal.number, value, pass_rate_constraint(record, records))

    def _search_done(self) -> bool:
        if self.search.running():
            return False
        finished = len(self.store.trials(self.sweep_id, ("done", "failed")))
        if finished >= self.optuna.n_trials:
            return True
        if self.spec.max_trials is not None and finished >= self.spec.max_trials:
            return True
        spent = sum(self.store.trial_seconds(self.sweep_id).values())
        return self.spec.max_hours is not None and spent >= self.spec.max_hours * 3600

    def _trial_of(self, proposal: Proposal) -> TrialRow:
        """The store trial of an Optuna trial, created on the first ask."""
        for row in self.store.trials(self.sweep_id):
            if row["repeat"] == proposal.number + 1:
                return row
        config = Config(proposal.params, tuple(sorted(proposal.vars.items())))
        index = self.store.next_order_index(self.sweep_id)
        planned = PlannedTrial(index, config, proposal.number + 1, False)
        return self.store.add_trials(self.sweep_id, [planned])[0]

    def _confirm_race(self) -> RacePlanner:
        configs = [(c, True) for c in [self.spec.baseline] if c is not None]
        for proposal in self.search.best(self.optuna.confirm_top):
            config = Config(proposal.params, tuple(sorted(proposal.vars.items())))
            if all(config != c for c, _ in configs):
                configs.append((config, False))
        spec = self.spec
        first = plan_trials(
            configs, spec.min_repeats, "interleaved", spec.seed, spec.passes_per_start
        )
        name = spec.name + CONFIRM_SUFFIX
        sweep_id = self.store.open_sweep(name, spec.text, spec.hash, first, spec.base_dir)
        return RacePlanner(spec, self.store, sweep_id, configs)


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
        return -ALPHA
    return ALPHA - fisher_exact_two_sided(*counts, *best)


__all__ = ["CONFIRM_SUFFIX", "SearchPlanner", "pass_rate_constraint", "study_path"]
