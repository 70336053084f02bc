"""Every swept key must reach the service: checked by rendering every config's launch.

    check_axes_reach(spec, store_path)    # a check before the first stop (before_stop.CHECKS)

A config is what the service is started with: its launch is the rendered
command (`ServiceSpec.render_argv`, `{method_args}` included), the rendered
environment (`render_env`: `[service.env]` and what the method's flags set, e.g.
SGLang's DDTree top-k) and, for `control = "hot"`, the body posted to the server.
Two configs that render the same launch would be measured as two and run as one:
refused, naming the keys they differ in. And each swept key is probed on its own:
a config with only that key changed (to another value the spec sweeps) must render
another launch; where it does not, the key appears nowhere in what is started, so
every value of it would run the same. Refused with the key and the fix, before
anything is stopped, with the engine check on or off. A hooks service gets every
value as `DDTUNE_<NAME>`, so nothing is refused there.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ddtune.errors import UserError
from ddtune.params import KNOB_KEYS, MODE_PARAMS, DecodeParams
from ddtune.services.spec import ServiceSpec
from ddtune.sweep.spec.parse import Config, SweepSpec

Launch = tuple[tuple[str, ...], tuple[tuple[str, str], ...], tuple[tuple[str, Any], ...]]


@dataclass(frozen=True)
class Axis:
    """One key a config can set: a decoding parameter, a method knob or a user variable."""

    kind: str  # "param" | "knob" | "var"
    name: str

    def value(self, config: Config) -> Any:
        if self.kind == "var":
            return config.user_vars().get(self.name)
        if self.kind == "knob":
            return config.params.method_config().get(self.name)
        return getattr(config.params, self.name)

    def changed(self, config: Config, value: Any) -> Config:
        """`config` with only this key set to `value` (a UserError where the method's
        rules do not allow it alone)."""
        if self.kind == "var":
            return Config(
                config.params, tuple(sorted({**config.user_vars(), self.name: value}.items()))
            )
        wire = config.params.to_wire()
        if self.kind == "knob":
            wire["method_knobs"] = {**wire.get("method_knobs", {}), self.name: value}
        else:
            wire[self.name] = value
        return replace(config, params=DecodeParams.from_wire(wire).canonical())

    def label(self) -> str:
        return f"vars.{self.name}" if self.kind == "var" else self.name


def check_axes_reach(spec: SweepSpec, store_path: Path) -> None:
    """Refuse keys that reach no launch, then configs that render the same launch."""
    service = spec.service
    if service.control == "hooks":
        return  # every value reaches the hooks as DDTUNE_<NAME>
    configs = _configs(spec)
    unreached: dict[Axis, tuple[Config, Config]] = {}
    for axis, config, other in _probes(configs):
        if axis not in unreached and launch_of(service, config) == launch_of(service, other):
            unreached[axis] = (config, other)
    if unreached:
        raise UserError(_unreached(unreached, service, spec), key=_key(next(iter(unreached)), spec))
    _same_launch(service, configs, spec)


def launch_of(service: ServiceSpec, config: Config) -> Launch:
    """What starting `config` hands the service: argv, environment, and a hot body."""
    params, user = config.params, config.user_vars()
    argv = tuple(service.render_argv(params, user)) if service.command else ()
    env = tuple(sorted(service.render_env(params, user).items()))
    body = tuple(sorted(params.to_wire().items(), key=str)) if service.control == "hot" else ()
    return argv, env, tuple((k, str(v)) for k, v in body)


def _configs(spec: SweepSpec) -> list[Config]:
    configs = [config for config, _ in spec.all_configs()]
    if spec.search is not None:
        configs += [Config(p, tuple(sorted(u.items()))) for p, u in spec.search.covering()]
    return list(dict.fromkeys(configs))


def _same_launch(service: ServiceSpec, configs: list[Config], spec: SweepSpec) -> None:
    seen: dict[Launch, Config] = {}
    for config in configs:
        launch = launch_of(service, config)
        first = seen.setdefault(launch, config)
        if first is not config:
            axes = [a for a in _axes(first, config) if a.value(first) != a.value(config)]
            names = [a.label() for a in axes] or _differ(first, config)
            raise UserError(
                f"configs {first.label()!r} and {config.label()!r} render the same launch "
                f"(argv and environment): they differ in {', '.join(names)}, which reaches "
                f"nothing the service is started with; {_fix(names, service)}",
                key=_key(axes[0], spec) if axes else "space",
            )


def _differ(first: Config, second: Config) -> list[str]:
    """The keys of the wire form in which two configs differ (mode, method, ...)."""
    a, b = first.to_wire(), second.to_wire()
    return [key for key in dict.fromkeys([*a, *b]) if a.get(key) != b.get(key)] or ["nothing"]


def _axes(*configs: Config) -> list[Axis]:
    """The keys these configs can set: their mode's parameters, the DDTree knobs, their
    method's knobs, their variables."""
    found: dict[Axis, None] = {}
    for config in configs:
        params = config.params
        names = MODE_PARAMS[params.mode] + (KNOB_KEYS if params.mode == "ddtree" else ())
        found |= dict.fromkeys(Axis("param", n) for n in names)
        found |= dict.fromkeys(Axis("knob", k) for k, _ in params.method_knobs)
        found |= dict.fromkeys(Axis("var", k) for k, _ in config.vars)
    return list(found)


def _probes(configs: list[Config]) -> Iterator[tuple[Axis, Config, Config]]:
    """(key, config, the config with only that key changed to another swept value)."""
    groups: dict[tuple[str, str | None], list[Config]] = {}
    for config in configs:
        groups.setdefault((config.params.mode, config.params.method), []).append(config)
    for group in groups.values():
        for axis in _axes(*group):
            values = list(dict.fromkeys(axis.value(c) for c in group))
            if len(values) < 2:
                continue  # not swept within the method
            for config in group:
                other = _other(axis, config, values)
                if other is not None:
                    yield axis, config, other


def _other(axis: Axis, config: Config, values: list[Any]) -> Config | None:
    for value in values:
        if value == axis.value(config):
            continue
        try:
            changed = axis.changed(config, value)
        except UserError:
            continue  # the method's rules tie this key to another: not probed alone
        if changed != config:
            return changed
    return None


def _unreached(
    unreached: dict[Axis, tuple[Config, Config]], service: ServiceSpec, spec: SweepSpec
) -> str:
    keys = ", ".join(_shown(axis, spec) for axis in unreached)
    config, other = next(iter(unreached.values()))
    names = [axis.label() for axis in unreached]
    they = "it appears" if len(names) == 1 else "they appear"
    return (
        f"{keys}: swept, but {they} nowhere in what the service is started with "
        f"({config.label()!r} and {other.label()!r} render the same argv and environment), "
        f"so every value would run the same config; {_fix(names, service)}"
    )


def _fix(names: list[str], service: ServiceSpec) -> str:
    if service.control == "systemd" and not service.command:
        return (
            "the unit's own ExecStart= runs unchanged: give [service] command with the "
            "placeholders, or use them in [service.env]"
        )
    marks = " and ".join("{" + name.split(".")[-1] + "}" for name in names)
    return (
        f"put {marks} where the engine reads {'it' if len(names) == 1 else 'them'} in "
        "[service] command or env (a method's knobs: {method_args}, which `sweep init "
        "--methods` writes), or stop sweeping " + ("it" if len(names) == 1 else "them")
    )


def _shown(axis: Axis, spec: SweepSpec) -> str:
    """The key as the user wrote it (`space.topk`), or `topk of [[configs]]`."""
    key = _key(axis, spec)
    return f"{axis.label()} of [[configs]]" if key == "configs" else key


def _key(axis: Axis, spec: SweepSpec) -> str:
    """Where the spec writes the axis: `space.<method>.<key>`, `space.<key>`,
    `space.vars.<name>`, else `configs`."""
    try:
        space = tomllib.loads(spec.text).get("space", {}) if spec.text else {}
    except tomllib.TOMLDecodeError:
        space = {}
    if axis.kind == "var":
        return f"space.vars.{axis.name}" if axis.name in space.get("vars", {}) else "configs"
    for name, table in space.items():
        if isinstance(table, dict) and axis.name in table and name != "vars":
            return f"space.{name}.{axis.name}"
    return f"space.{axis.name}" if axis.name in space else "configs"


__all__ = ["Axis", "check_axes_reach", "launch_of"]
