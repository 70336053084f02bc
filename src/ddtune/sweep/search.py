"""Model-based search (`strategy = "optuna"`): a search space with ranges, an Optuna study.

    space = SearchSpace.from_table(spec_table["space"])        # lists and ranges
    search = Search(space, Path("runs/x/store.optuna.sqlite"), study_name="x", seed=0)
    proposal = search.ask()        # Proposal(number, params: DecodeParams, vars)
    search.tell(proposal.number, value)            # value None: the trial failed (FAIL)

The study lives in SQLite next to the store, so a killed search resumes: `ask`
first hands back a trial that was asked but never told. Every ask uses a TPE
sampler seeded by (seed, trial number), so the proposals depend only on the
finished trials, never on when the process restarted. Failed trials are told
as FAIL, never as a zero. See docs/architecture.md "Sweep".
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import optuna
from pydantic import Discriminator, Field, Tag

from ddtune.errors import UserError
from ddtune.params import MODES, DecodeParams, window_from_wire
from ddtune.tables import StrictModel, parse_table

Choice = str | int | None


class IntRange(StrictModel):
    """`{low = 2, high = 256, log = true}`: integers low..high (inclusive)."""

    low: int
    high: int
    log: bool = False
    step: int = Field(default=1, ge=1)

    def values(self) -> int:
        return (self.high - self.low) // self.step + 1


Dimension = list[Choice] | IntRange


def _shape(value: Any) -> str:
    """Union tag: a table is a range, anything else must be a list (errors then name the key)."""
    return "dict" if isinstance(value, Mapping | IntRange) else "list"


_BY_SHAPE = Discriminator(_shape)
IntDim = Annotated[Annotated[list[int], Tag("list")] | Annotated[IntRange, Tag("dict")], _BY_SHAPE]
WindowDim = Annotated[
    Annotated[list[int | str], Tag("list")] | Annotated[IntRange, Tag("dict")], _BY_SHAPE
]


class SpaceTable(StrictModel):
    mode: list[str] = Field(default_factory=lambda: ["ddtree"])
    budget: IntDim = Field(default_factory=lambda: [16])
    topk: IntDim = Field(default_factory=lambda: [4])
    window: WindowDim = Field(default_factory=lambda: _no_window())
    vars: dict[str, list[str | int | float | bool]] = Field(default_factory=dict)


def _no_window() -> list[int | str]:
    return ["none"]


@dataclass(frozen=True)
class SearchSpace:
    modes: tuple[str, ...]
    dims: Mapping[str, Dimension]  # budget, topk, window
    vars: Mapping[str, Sequence[Any]]

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str = "space") -> SearchSpace:
        """Strict parse; a UserError names the offending key (e.g. `space.budget.low`)."""
        parsed = parse_table(SpaceTable, table, where)
        for mode in parsed.mode:
            if mode not in MODES:
                raise UserError(
                    f"{where}.mode: unknown mode {mode!r}; expected some of {', '.join(MODES)}",
                    key=f"{where}.mode",
                )
        dims: dict[str, Dimension] = {}
        for name in ("budget", "topk", "window"):
            dims[name] = _checked(getattr(parsed, name), f"{where}.{name}")
        for name, values in parsed.vars.items():
            _check_list(values, f"{where}.vars.{name}")
        space = cls(tuple(dict.fromkeys(parsed.mode)), dims, parsed.vars)
        if space.size() < 2:
            raise UserError(
                f"{where}: the search space is a single point; give a range or a list "
                "with 2+ values (or use strategy = 'grid')",
                key=where,
            )
        return space

    def size(self) -> int:
        """Distinct canonical configs (ar ignores budget/topk/window; dflash budget/topk)."""
        n = {name: _count(dim) for name, dim in self.dims.items()}
        per_mode = {"ar": 1, "dflash": n["window"], "ddtree": n["budget"] * n["topk"] * n["window"]}
        return sum(per_mode[m] for m in self.modes) * math.prod(len(v) for v in self.vars.values())

    def suggest(self, trial: optuna.trial.BaseTrial) -> tuple[DecodeParams, dict[str, Any]]:
        """Draw a config in the trial (define-by-run: parameters a mode ignores are not drawn)."""
        mode = _categorical(trial, "mode", list(self.modes))
        wire: dict[str, Any] = {"mode": mode}
        names = {"ar": (), "dflash": ("window",), "ddtree": ("budget", "topk", "window")}[mode]
        for name in names:
            wire[name] = _draw(trial, name, self.dims[name])
        user = {name: _categorical(trial, f"vars.{name}", list(v)) for name, v in self.vars.items()}
        return DecodeParams.from_wire(wire, "space").canonical(), user


@dataclass(frozen=True)
class Proposal:
    number: int
    params: DecodeParams
    vars: dict[str, Any]


class Search:
    """An Optuna study (TPE) over a `SearchSpace`, stored in SQLite (None: in memory)."""

    def __init__(
        self,
        space: SearchSpace,
        storage: Path | None,
        *,
        study_name: str,
        seed: int = 0,
        maximize: bool = True,
        n_startup_trials: int = 10,
    ) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.space, self.seed, self.n_startup = space, seed, n_startup_trials
        self.study = optuna.create_study(
            study_name=study_name,
            storage=None if storage is None else f"sqlite:///{Path(storage)}",
            direction="maximize" if maximize else "minimize",
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
        states = (optuna.trial.TrialState.RUNNING,)
        return [self._proposal(t) for t in self.study.get_trials(deepcopy=False, states=states)]

    def completed(self) -> list[tuple[Proposal, float]]:
        states = (optuna.trial.TrialState.COMPLETE,)
        trials = self.study.get_trials(deepcopy=False, states=states)
        return [(self._proposal(t), float(t.value)) for t in trials if t.value is not None]

    def best(self, k: int) -> list[Proposal]:
        """The k best distinct feasible configs (geometric mean over repeated proposals)."""
        groups: dict[tuple[DecodeParams, str], list[tuple[Proposal, float]]] = {}
        for proposal, value in self.completed():
            if self._feasible(proposal.number) and value > 0:
                key = (proposal.params, repr(sorted(proposal.vars.items())))
                groups.setdefault(key, []).append((proposal, value))
        sign = 1.0 if self.study.direction == optuna.study.StudyDirection.MAXIMIZE else -1.0
        ranked = sorted(
            groups.values(),
            key=lambda g: (-sign * math.fsum(math.log(v) for _, v in g) / len(g), g[0][0].number),
        )
        return [g[0][0] for g in ranked[:k]]

    def _proposal(self, trial: optuna.trial.FrozenTrial) -> Proposal:
        params, user = self.space.suggest(optuna.trial.FixedTrial(_fixed_values(trial)))
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
                n_startup_trials=self.n_startup,
                multivariate=True,
                group=True,
                constant_liar=False,
            )


def _fixed_values(trial: optuna.trial.FrozenTrial) -> dict[str, Any]:
    return dict(trial.params)


def _draw(trial: optuna.trial.BaseTrial, name: str, dim: Dimension) -> Any:
    if isinstance(dim, IntRange):
        if dim.low == dim.high:
            return dim.low
        return trial.suggest_int(name, dim.low, dim.high, step=dim.step, log=dim.log)
    return _categorical(trial, name, dim)


def _categorical(trial: optuna.trial.BaseTrial, name: str, choices: list[Any]) -> Any:
    return choices[0] if len(choices) == 1 else trial.suggest_categorical(name, choices)


def _count(dim: Dimension) -> int:
    return dim.values() if isinstance(dim, IntRange) else len(dim)


def _checked(dim: Any, key: str) -> Dimension:
    if isinstance(dim, IntRange):
        if dim.low > dim.high:
            raise UserError(
                f"{key}.low ({dim.low}) is above {key}.high ({dim.high})", key=f"{key}.low"
            )
        if dim.log and (dim.low < 1 or dim.step != 1):
            raise UserError(f"{key}: a log range needs low >= 1 and step 1", key=f"{key}.log")
        return dim
    values = list(dim)
    if key.endswith(".window"):
        values = [_wire_window(v, key) for v in values]
    _check_list(values, key)
    return values


def _wire_window(value: Any, key: str) -> Any:
    parsed = window_from_wire(value, key.rsplit(".", 1)[0])
    return "none" if parsed is None else parsed


def _check_list(values: Sequence[Any], key: str) -> None:
    if not values:
        raise UserError(f"{key} is an empty list; give at least one value", key=key)
    if len(set(map(repr, values))) != len(values):
        raise UserError(f"{key} lists a value twice: {list(values)!r}", key=key)


__all__ = ["IntRange", "Proposal", "Search", "SearchSpace"]
