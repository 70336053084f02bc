"""The `[service]` table of a sweep spec: what to start and how long each phase may take.

Parsing is strict: an unknown key or a wrong type is a `UserError` that names
the key. `render_*` turn a trial's parameters into the argv, environment and
hook variables of one launch (placeholders `{budget} {topk} {window} {port}
{mode} {host}` plus the user's `vars`; a `None` window renders as "none").
"""

from __future__ import annotations

import string
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ddtune.errors import UserError
from ddtune.kinds import SERVER_KINDS

KINDS = ("process", "systemd", "hooks", "hot")
PROFILES = SERVER_KINDS  # service.profile names a server kind
GPU_MODES = ("auto", "off")
BUILTIN_PLACEHOLDERS = ("mode", "budget", "topk", "window", "port", "host")
HOOK_NAMES = ("stop", "start", "logs")


@dataclass(frozen=True)
class Timeouts:
    """Seconds each phase may take; defaults allow a 10-minute model load."""

    stop: float = 30.0  # stop command / SIGTERM grace before SIGKILL
    quiesce: float = 60.0  # after SIGKILL: processes gone and ports free
    gpu: float = 120.0  # GPU memory back to the baseline
    start: float = 600.0  # launch until the new instance listens on its port
    health: float = 600.0  # health endpoint answers 200
    identity: float = 60.0  # identity is new and config equals the request
    generate: float = 120.0  # consecutive 1-token generations
    request: float = 30.0  # one HTTP request

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Timeouts:
        _check_keys("service.timeouts", data, {f.name for f in fields(cls)})
        for key, value in data.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise UserError(
                    f"service.timeouts.{key} must be a positive number of seconds; got {value!r}"
                )
        return cls(**{k: float(v) for k, v in data.items()})


@dataclass(frozen=True)
class ServiceSpec:
    """How to run one server; see docs/architecture.md "Services"."""

    kind: str = "process"
    profile: str = "ddtune"
    command: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    vars: dict[str, Any] = field(default_factory=dict)
    port: int = 8000
    host: str = "127.0.0.1"
    cwd: str | None = None
    unit: str | None = None
    systemd_dir: str = "/run/systemd/system"
    hooks: dict[str, str] = field(default_factory=dict)
    health_url: str | None = None
    model: str | None = None
    generations: int = 3
    gpu: str = "auto"
    gpu_tolerance_mib: int = 256
    timeouts: Timeouts = field(default_factory=Timeouts)

    @classmethod
    def from_dict(cls, table: dict[str, Any]) -> ServiceSpec:
        """Build from the parsed TOML table; every key is checked."""
        if not isinstance(table, dict):
            raise UserError(f"[service] must be a table; got {type(table).__name__}")
        _check_keys("service", table, {f.name for f in fields(cls)})
        data = dict(table)
        _check_choice(data, "kind", KINDS)
        _check_choice(data, "profile", PROFILES)
        _check_choice(data, "gpu", GPU_MODES)
        for key in ("host", "cwd", "unit", "systemd_dir", "health_url", "model"):
            _check_type(data, key, str)
        for key, low in (("port", 1), ("generations", 1), ("gpu_tolerance_mib", 0)):
            _check_int(data, key, low)
        if "command" in data:
            data["command"] = tuple(_str_list("service.command", data["command"]))
        data["env"] = _str_table("service.env", data.get("env", {}))
        data["hooks"] = _str_table("service.hooks", data.get("hooks", {}))
        _check_keys("service.hooks", data["hooks"], set(HOOK_NAMES))
        data["vars"] = _vars_table(data.get("vars", {}))
        data["timeouts"] = Timeouts.from_dict(_table("service.timeouts", data.get("timeouts", {})))
        spec = cls(**data)
        spec.validate()
        return spec

    def validate(self) -> None:
        """Check that the kind has what it needs and every placeholder is known."""
        if self.kind in ("process", "hot") and not self.command:
            raise UserError(f"service.command is required for kind = {self.kind!r} (an argv list)")
        if self.kind == "systemd" and not self.unit:
            raise UserError("service.unit is required for kind = 'systemd' (e.g. 'sglang.service')")
        if self.kind == "hooks" and not {"stop", "start"} <= set(self.hooks):
            raise UserError("kind = 'hooks' needs service.hooks.start and service.hooks.stop")
        if self.kind == "hot" and self.profile != "ddtune":
            raise UserError(
                "kind = 'hot' works with profile = 'ddtune' only (POST /v1/ddtree/config)"
            )
        if self.profile == "openai" and not self.model:
            raise UserError("profile = 'openai' needs service.model (the model name to request)")
        known = set(BUILTIN_PLACEHOLDERS) | set(self.vars)
        for where, text in [("command", a) for a in self.command] + [
            (f"env.{k}", v) for k, v in self.env.items()
        ]:
            for name in _placeholders(where, text):
                if name not in known:
                    raise UserError(
                        f"service.{where} uses unknown placeholder {{{name}}}; "
                        f"known: {', '.join(sorted(known))} (add it to [service.vars])"
                    )

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def values(self, params: dict[str, Any]) -> dict[str, str]:
        """Placeholder values for one trial: user vars, then params, then port/host."""
        merged = {**self.vars, **params, "port": self.port, "host": self.host}
        return {k: "none" if v is None else str(v) for k, v in merged.items()}

    def render_argv(self, params: dict[str, Any]) -> list[str]:
        values = self.values(params)
        return [arg.format_map(values) for arg in self.command]

    def render_env(self, params: dict[str, Any]) -> dict[str, str]:
        values = self.values(params)
        return {k: v.format_map(values) for k, v in self.env.items()}

    def hook_env(self, params: dict[str, Any]) -> dict[str, str]:
        """`DDTUNE_<NAME>` for every placeholder value, plus the rendered `env` table."""
        hook_vars = {f"DDTUNE_{k.upper()}": v for k, v in self.values(params).items()}
        return {**hook_vars, **self.render_env(params)}

    def to_dict(self) -> dict[str, Any]:
        """A TOML-able table (None fields are left out) that from_dict() reads back."""
        data = {k: v for k, v in asdict(self).items() if v is not None}
        data["command"] = list(self.command)
        return data


def _placeholders(where: str, text: str) -> list[str]:
    try:
        return [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        raise UserError(
            f"service.{where}: bad placeholder syntax in {text!r} ({exc}); use {{{{ }}}} for literal braces"
        ) from None


def _check_keys(where: str, data: dict[str, Any], known: set[str]) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise UserError(
            f"unknown key(s) in [{where}]: {', '.join(unknown)}; expected some of {', '.join(sorted(known))}"
        )


def _check_choice(data: dict[str, Any], key: str, choices: tuple[str, ...]) -> None:
    if key in data and data[key] not in choices:
        raise UserError(f"service.{key} must be one of {', '.join(choices)}; got {data[key]!r}")


def _check_type(data: dict[str, Any], key: str, kind: type) -> None:
    if key in data and not isinstance(data[key], kind):
        raise UserError(f"service.{key} must be a {kind.__name__}; got {data[key]!r}")


def _check_int(data: dict[str, Any], key: str, low: int) -> None:
    value = data.get(key, low)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise UserError(f"service.{key} must be an integer >= {low}; got {value!r}")


def _table(where: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UserError(f"{where} must be a table; got {value!r}")
    return value


def _str_list(where: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where} must be a list of strings (an argv); got {value!r}")
    return value


def _str_table(where: str, value: Any) -> dict[str, str]:
    table = _table(where, value)
    for key, item in table.items():
        if not isinstance(item, str):
            raise UserError(f"{where}.{key} must be a string; got {item!r}")
    return dict(table)


def _vars_table(value: Any) -> dict[str, Any]:
    table = _table("service.vars", value)
    for key, item in table.items():
        if key in BUILTIN_PLACEHOLDERS:
            raise UserError(f"service.vars.{key} shadows a built-in placeholder; pick another name")
        if not isinstance(item, str | int | float) and item is not None:
            raise UserError(f"service.vars.{key} must be a string or number; got {item!r}")
    return dict(table)
