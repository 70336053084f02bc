"""The grid of a `[space]` that names methods: `method = [...]` and `[space.<method>]` axes.

    [space]
    method = ["ar", "eagle3", "dflash", "ddtree"]
    budget = [8, 16]             # dflash/ddtree read budget/topk/window from [space] ...
    [space.eagle3]
    num_steps = [3, 5]           # ... every other method only from its own table
    topk = 1
    num_draft_tokens = [4, 6]    # (checked per combination: topk 1 needs steps + 1)
    drafter = "/models/eagle3"

Each method's grid is the product of its own axes (and the `[space.vars]` axes);
the sweep is their union. A knob a method lacks is refused naming the knobs it
has (`ddtune.methods.unknown_knob`); a combination the method's rules forbid
is refused with the rule. See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from ddtune.errors import UserError
from ddtune.methods import LEGACY, method, unknown_knob
from ddtune.params import DECODE_KEYS, DecodeParams
from ddtune.sweep.spec.schema import SpaceTable

Point = tuple[DecodeParams, tuple[tuple[str, Any], ...]]


def method_grid(space: SpaceTable) -> list[Point]:
    """Every method's configs (canonical, in spec order) with the variables' product."""
    if space.mode:
        raise UserError(
            "space.mode: write method = [...] alone (a method list replaces mode)",
            key="space.mode",
        )
    names = [method(n, "space").name for n in space.method]
    for name in space.methods:
        if name not in names:
            raise UserError(
                f"space.{name}: method {name!r} is not in space.method ({', '.join(names)}); "
                "add it there or remove the table",
                key=f"space.{name}",
            )
    var_axes = dict(sorted(space.vars.items()))
    points: list[Point] = []
    for name in names:
        for wire in _method_points(space, name):
            for combo in itertools.product(*var_axes.values()):
                user = tuple(zip(var_axes, combo, strict=True))
                points.append((DecodeParams.from_wire(wire, f"space.{name}").canonical(), user))
    return list(dict.fromkeys(points))


def _method_points(space: SpaceTable, name: str) -> list[dict[str, Any]]:
    """One wire dict (`method`, mode fields, `method_knobs`) per point of the method's grid."""
    own = dict(space.methods.get(name, {}))
    found = method(name)
    shared: Mapping[str, tuple[Any, ...]] = space.axes() if name in LEGACY else {}
    fields = {k: v for k, v in {**shared, **own}.items() if k in DECODE_KEYS and name in LEGACY}
    knobs = {k: v for k, v in own.items() if k not in fields}
    for key in knobs:
        if found.knob(key) is None:
            raise UserError(unknown_knob(found, key, f"space.{name}"), key=f"space.{name}.{key}")
    axes = {**fields, **{f"knob.{k}": v for k, v in knobs.items()}}
    points = []
    for combo in itertools.product(*axes.values()):
        chosen = dict(zip(axes, combo, strict=True))
        wire: dict[str, Any] = {k: v for k, v in chosen.items() if not k.startswith("knob.")}
        wire["method"] = name
        wire["method_knobs"] = {k[5:]: v for k, v in chosen.items() if k.startswith("knob.")}
        points.append(wire)
    return points


__all__ = ["method_grid"]
