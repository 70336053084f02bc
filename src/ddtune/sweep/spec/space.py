"""The search space of `strategy = "optuna"`: lists and integer ranges of the parameters.

    space = SearchSpace.from_table({"budget": {"low": 2, "high": 256, "log": True},
                                    "topk": {"low": 1, "high": 8}, "window": ["none", 64]})
    space.size()                      # distinct canonical configs (8160 here)
    params, user_vars = space.suggest(optuna_trial)
    space.covering()                  # every value of every dimension at least once

The DDTree knobs (`depth_bonus`, `rank_probe`) are lists only, drawn for
`ddtree` trials.
Errors name the key (`space.budget.low`, `space`: a single point). No Optuna
import at load time (a spec parse must stay fast). See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ddtune.errors import UserError
from ddtune.params import MODE_PARAMS, MODES, DecodeParams, window_from_wire
from ddtune.sweep.spec.schema import IntRange, SpaceTable
from ddtune.tables import parse_table

if TYPE_CHECKING:
    import optuna

Choice = str | int | None
Dimension = list[Choice] | IntRange
DEFAULTS: dict[str, list[Choice]] = {"budget": [16], "topk": [4], "window": ["none"]}


@dataclass(frozen=True)
class SearchSpace:
    modes: tuple[str, ...]
    dims: Mapping[str, Dimension]  # budget, topk, window
    vars: Mapping[str, Sequence[Any]]
    knobs: Mapping[str, Sequence[Any]] = field(default_factory=dict)  # ddtree only

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str = "space") -> SearchSpace:
        """Strict parse; a UserError names the offending key (e.g. `space.budget.low`)."""
        return cls.from_space(parse_table(SpaceTable, table, where), where)

    @classmethod
    def from_space(cls, parsed: SpaceTable, where: str = "space") -> SearchSpace:
        """The search space of a parsed `[space]` table (lists, single values and ranges)."""
        if parsed.method or parsed.methods:
            raise UserError(
                f"{where}.method: strategy 'optuna' searches mode/budget/topk/window only; "
                "sweep methods with strategy 'grid' or 'race'",
                key=f"{where}.method",
            )
        modes = list(parsed.mode) or ["ddtree"]
        for mode in modes:
            if mode not in MODES:
                raise UserError(
                    f"{where}.mode: unknown mode {mode!r}; expected some of {', '.join(MODES)}",
                    key=f"{where}.mode",
                )
        _check_list(modes, f"{where}.mode")
        dims: dict[str, Dimension] = {}
        for name in ("budget", "topk", "window"):
            written = getattr(parsed, name) if name in parsed.model_fields_set else DEFAULTS[name]
            dims[name] = _checked(written, f"{where}.{name}")
        for name, values in parsed.vars.items():
            _check_list(values, f"{where}.vars.{name}")
        knobs = {name: list(axis) for name, axis in parsed.knob_axes().items()}
        for name, choices in knobs.items():
            _check_list(choices, f"{where}.{name}")
            for choice in choices:
                DecodeParams.from_wire({name: choice}, where)
        space = cls(tuple(modes), dims, {k: list(v) for k, v in parsed.vars.items()}, knobs)
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
        tree = n["budget"] * n["topk"] * n["window"] * math.prod(map(len, self.knobs.values()))
        per_mode = {"ar": 1, "dflash": n["window"], "ddtree": tree}
        return sum(per_mode[m] for m in self.modes) * math.prod(len(v) for v in self.vars.values())

    def suggest(self, trial: optuna.trial.BaseTrial) -> tuple[DecodeParams, dict[str, Any]]:
        """Draw a config in the trial (define-by-run: parameters a mode ignores are not drawn)."""
        mode = _categorical(trial, "mode", list(self.modes))
        wire: dict[str, Any] = {"mode": mode}
        names = MODE_PARAMS[mode]
        for name in names:
            wire[name] = _draw(trial, name, self.dims[name])
        if mode == "ddtree":
            wire.update(
                {name: _categorical(trial, name, list(v)) for name, v in self.knobs.items()}
            )
        user = {name: _categorical(trial, f"vars.{name}", list(v)) for name, v in self.vars.items()}
        return DecodeParams.from_wire(wire, "space").canonical(), user

    def covering(self) -> list[tuple[DecodeParams, dict[str, Any]]]:
        """Configs that show every value of every dimension at least once (a range: its ends),
        the others at their first value: what the engine check checks of a search space."""
        found: dict[tuple[Any, ...], tuple[DecodeParams, dict[str, Any]]] = {}
        for mode in self.modes:
            names = MODE_PARAMS[mode]
            axes = {name: _ends(self.dims[name]) for name in names}
            axes |= {name: list(v) for name, v in self.knobs.items()} if mode == "ddtree" else {}
            axes |= {f"vars.{name}": list(v) for name, v in self.vars.items()}
            first = {name: values[0] for name, values in axes.items()}
            for name, values in axes.items():
                for value in values:
                    chosen = {**first, name: value}
                    wire = {"mode": mode, **{k: v for k, v in chosen.items() if "." not in k}}
                    user = {k[5:]: v for k, v in chosen.items() if k.startswith("vars.")}
                    params = DecodeParams.from_wire(wire, "space").canonical()
                    found.setdefault((params, tuple(sorted(user.items()))), (params, user))
            if not axes:
                alone = DecodeParams.from_wire({"mode": mode}, "space").canonical()
                found.setdefault((alone, ()), (alone, {}))
        return list(found.values())


def _draw(trial: optuna.trial.BaseTrial, name: str, dim: Dimension) -> Any:
    if isinstance(dim, IntRange):
        if dim.low == dim.high:
            return dim.low
        return trial.suggest_int(name, dim.low, dim.high, step=dim.step, log=dim.log)
    return _categorical(trial, name, dim)


def _categorical(trial: optuna.trial.BaseTrial, name: str, choices: list[Any]) -> Any:
    return choices[0] if len(choices) == 1 else trial.suggest_categorical(name, choices)


def _ends(dim: Dimension) -> list[Any]:
    if isinstance(dim, IntRange):
        return sorted({dim.low, dim.low + (dim.count() - 1) * dim.step})
    return list(dim)


def _count(dim: Dimension) -> int:
    return dim.count() if isinstance(dim, IntRange) else len(dim)


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


__all__ = ["SearchSpace"]
