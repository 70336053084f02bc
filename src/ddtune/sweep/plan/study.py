"""Model-based search (`strategy = "optuna"`): a search space with ranges, an Optuna study.

    space = SearchSpace.from_table(spec_table["space"])        # ddtune.sweep.spec.space
    search = Search(space, Path("runs/x/store.optuna.sqlite"), study_name="x", seed=0)
    proposal = search.ask()        # Proposal(number, params: DecodeParams, vars)
    search.tell(proposal.number, value)            # value None: the trial failed (FAIL)

The study lives in SQLite next to the store, so a killed search resumes: `ask`
first hands back a trial that was asked but never told. Every ask uses a TPE
sampler seeded by (seed, trial number), so the proposals depend only on the
finished trials, never on when the process restarted. Failed trials are told
as FAIL, never as a zero. See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from ddtune.params import DecodeParams
from ddtune.sweep.spec.space import SearchSpace


@dataclass(frozen=True)
class Proposal:
    number: int
    params: DecodeParams
    vars: dict[str, Any]


class Search:
    """An Optuna study (TPE) over a `SearchSpace`, stored in SQLite (None: in memory)."""

    def __init__(
        self, space: SearchSpace, storage: Path | None, *, study_name: str, seed: int = 0
    ) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.space, self.seed = space, seed
        self.study = optuna.create_study(
            study_name=study_name,
            storage=None if storage is None else f"sqlite:///{Path(storage)}",
            direction="maximize",
            load_if_exists=True,
            sampler=self._sampler(0),
        )

    def ask(self) -> Proposal:
        """The oldest asked-but-untold trial (after a kill), else a new one."""
        running = self.running()
        if running:
            return running[0]
        number = len(self.study.get_trials(deepcopy=False))
        self.study.sampler = self._sampler(number)
        trial = self.study.ask()
        params, user = self.space.suggest(trial)
        return Proposal(trial.number, params, user)

    def tell(self, number: int, value: float | None, constraint: float | None = None) -> None:
        """Finish a trial: a value, or None for a failed trial (FAIL, not a zero).

        `constraint` <= 0 means feasible (e.g. a minimum pass rate minus the measured one).
        """
        self.study.sampler = self._sampler(number)
        if constraint is not None:
            self._trial(number).set_constraint("constraint", constraint)
        if value is None or not math.isfinite(value):
            self.study.tell(number, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(number, value)

    def running(self) -> list[Proposal]:
        """The trials asked but not told."""
        return [self._proposal(t) for t in self._trials(optuna.trial.TrialState.RUNNING)]

    def completed(self) -> list[tuple[Proposal, float]]:
        """The trials told a value, and their values."""
        trials = self._trials(optuna.trial.TrialState.COMPLETE)
        return [(self._proposal(t), float(t.value)) for t in trials if t.value is not None]

    def best(self, k: int) -> list[Proposal]:
        """The k best distinct feasible configs (geometric mean over repeated proposals)."""
        groups: dict[tuple[DecodeParams, str], list[tuple[Proposal, float]]] = {}
        for proposal, value in self.completed():
            if self._feasible(proposal.number) and value > 0:
                key = (proposal.params, repr(sorted(proposal.vars.items())))
                groups.setdefault(key, []).append((proposal, value))
        ranked = sorted(
            groups.values(),
            key=lambda g: (-math.fsum(math.log(v) for _, v in g) / len(g), g[0][0].number),
        )
        return [g[0][0] for g in ranked[:k]]

    def _trials(self, state: optuna.trial.TrialState) -> list[optuna.trial.FrozenTrial]:
        return self.study.get_trials(deepcopy=False, states=(state,))

    def _proposal(self, trial: optuna.trial.FrozenTrial) -> Proposal:
        params, user = self.space.suggest(optuna.trial.FixedTrial(dict(trial.params)))
        return Proposal(trial.number, params, user)

    def _feasible(self, number: int) -> bool:
        return all(c <= 0 for c in self.study.trials[number].constraints.values())

    def _trial(self, number: int) -> optuna.trial.Trial:
        """A live handle on trial `number` (Optuna has no public id lookup)."""
        frozen = self.study.get_trials(deepcopy=False)[number]
        return optuna.trial.Trial(self.study, frozen._trial_id)

    def _sampler(self, number: int) -> optuna.samplers.TPESampler:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(
                seed=(self.seed * 1_000_003 + number) % 2**32,
                n_startup_trials=10,
                multivariate=True,
                group=True,
                constant_liar=False,
            )


__all__ = ["Proposal", "Search", "SearchSpace"]
