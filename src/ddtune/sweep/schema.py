"""The tables of a sweep spec as strict pydantic models (`ddtune.tables.StrictModel`).

    [sweep]      SweepTable: name, description, repeats, order, seed, baseline
    [space]      SpaceTable: lists (or single values) of mode/budget/topk/window,
                 [space.vars] lists of user variables
    [[configs]]  ConfigTable: mode/budget/topk/window + vars (also `sweep.baseline`)
    [service]    a plain table here: `ddtune.services.ServiceSpec` parses it
    [bench]      `ddtune.bench.BenchMatrix`
    [retry]      RetryPolicy: attempts, backoff

These models check the shape (unknown keys, types, ranges, variable names);
the decoding parameters themselves are checked by `DecodeParams.from_wire`
when `spec.py` builds the configurations, so both kinds of error carry the
full key path in `UserError.key`. See docs/architecture.md "Sweep".
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from ddtune.bench.matrix import BenchMatrix
from ddtune.params import PARAM_KEYS
from ddtune.tables import StrictModel

ORDERS = ("interleaved", "random", "sequential")
Order = Literal["interleaved", "random", "sequential"]
RESERVED_VARS = (*PARAM_KEYS, "port")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _sweep_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise ValueError("must be 1-64 letters, digits, '.', '_' or '-' (no leading '.', '_', '-')")
    return name


def _scalar(value: Any) -> Any:
    if isinstance(value, str | int | float | bool):
        return value
    raise ValueError("must be a string, number or boolean")


def _var_names(table: dict[str, Any]) -> dict[str, Any]:
    for name in table:
        if not _VAR_RE.match(name) or name in RESERVED_VARS:
            reserved = "/".join(RESERVED_VARS)
            raise ValueError(f"variable name {name!r} must be an identifier other than {reserved}")
    return table


def _axis(value: Any) -> tuple[Any, ...]:
    """A grid axis: a list of values, or one value written on its own."""
    values = tuple(value) if isinstance(value, list) else (value,)
    if not values:
        raise ValueError("is an empty list; give at least one value or remove the key")
    return values


VarValue = Annotated[Any, AfterValidator(_scalar)]
Axis = Annotated[tuple[Any, ...], BeforeValidator(_axis)]


class ConfigTable(StrictModel):
    """One `[[configs]]` table or `sweep.baseline`: parameters in wire form, plus vars."""

    mode: Any = None
    budget: Any = None
    topk: Any = None
    window: Any = None
    vars: Annotated[dict[str, VarValue], AfterValidator(_var_names)] = {}

    def params_wire(self) -> dict[str, Any]:
        """The decoding parameters the user wrote (the rest keep their defaults)."""
        return {key: getattr(self, key) for key in PARAM_KEYS if key in self.model_fields_set}


class SpaceTable(StrictModel):
    """`[space]`: the grid is the cartesian product of every axis written."""

    mode: Axis = ()
    budget: Axis = ()
    topk: Axis = ()
    window: Axis = ()
    vars: Annotated[
        dict[str, Annotated[tuple[VarValue, ...], BeforeValidator(_axis)]],
        AfterValidator(_var_names),
    ] = {}

    def axes(self) -> dict[str, tuple[Any, ...]]:
        """Decoding-parameter axes the user wrote, in `PARAM_KEYS` order."""
        return {key: getattr(self, key) for key in PARAM_KEYS if key in self.model_fields_set}


class SweepTable(StrictModel):
    name: Annotated[str, AfterValidator(_sweep_name)]
    description: str = ""
    repeats: Annotated[int, Field(ge=1, le=1000)] = 2
    order: Order = "interleaved"
    seed: int = 0
    baseline: ConfigTable | None = None


class RetryPolicy(StrictModel):
    attempts: Annotated[int, Field(ge=1, le=20)] = 2
    backoff: Annotated[float, Field(ge=0, le=3600)] = 2.0  # seconds before attempt 2, doubled after


class SpecDocument(StrictModel):
    """The whole TOML document."""

    sweep: SweepTable
    space: SpaceTable | None = None
    configs: list[ConfigTable] = []
    service: dict[str, Any] = {}
    bench: BenchMatrix = BenchMatrix()
    retry: RetryPolicy = RetryPolicy()


__all__ = [
    "ORDERS",
    "ConfigTable",
    "Order",
    "RetryPolicy",
    "SpaceTable",
    "SpecDocument",
    "SweepTable",
]
