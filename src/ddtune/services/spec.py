"""The `[service]` table of a sweep spec: what to start and how long each phase may take.

`ServiceSpec` is a strict pydantic table, read by
`parse_table(ServiceSpec, table, where="service")` (`ServiceSpec.from_dict`
is the same): an unknown key, a wrong type or a missing requirement of the
chosen control is a `UserError` whose `.key` is the full path of the setting
(e.g. `service.timeouts.stopp`). `render_*` turn one trial into the argv,
environment and hook variables of a launch: placeholders `{mode} {budget}
{topk} {window} {depth_bonus} {rank_probe} {port} {host}` plus
`[service.vars]` and the trial's user variables; the decoding parameters come
from `DecodeParams.placeholder_values()` only. `engine_check` (default on): the
engine's own argument parser checks every planned launch command before
anything is stopped (`ddtune.services.engine_check`).

`control` (how the service is started and stopped) and `engine` (which server
it is) were called `kind` and `profile` before, `engine_check` was `preflight`: `RENAMED` maps the old names,
which still read (`old_names` says which a table uses, for a note); an old and
a new name given with different values is an error naming both.
See docs/readiness.md "Services".
"""

from __future__ import annotations

import json
import shlex
import string
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from ddtune.engines import ENGINES, get_engine
from ddtune.errors import UserError
from ddtune.params import DECODE_KEYS, DecodeParams
from ddtune.tables import StrictModel, parse_table

Control = Literal["process", "systemd", "hooks", "hot"]
RENAMED = {
    "kind": "control",
    "profile": "engine",
    "preflight": "engine_check",
}  # [service] keys: old name -> new name
METHOD_ARGS = "{method_args}"  # a command argument replaced by the method's flags
BUILTIN_PLACEHOLDERS = (*DECODE_KEYS, "port", "host", "method", "method_args")
Seconds = Annotated[float, Field(gt=0)]
REQUIRED_WHEN = {  # field: (the field that requires it, that field's value, what to give)
    "unit": ("control", "systemd", "e.g. 'sglang.service'"),
    "model": ("engine", "openai", "the model name to request"),
}


def _argv(value: Any) -> Any:
    if not isinstance(value, list | tuple):
        raise ValueError("must be a list of strings (an argv)")
    return tuple(value)


def _scalar(value: Any) -> Any:
    if not isinstance(value, str | int | float):
        raise ValueError("must be a string or a number")
    return value


Argv = Annotated[tuple[str, ...], BeforeValidator(_argv)]
VarScalar = str | int | float | bool
VarValue = Annotated[VarScalar, BeforeValidator(_scalar)]


class Timeouts(StrictModel):
    """Seconds each phase may take; defaults allow a 10-minute model load."""

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, table: Any) -> Any:
        """`preflight` reads as `engine_check` (its name before)."""
        if isinstance(table, Mapping) and "preflight" in table and "engine_check" not in table:
            table = {("engine_check" if k == "preflight" else k): v for k, v in table.items()}
        return table

    stop: Seconds = 30.0  # stop command / SIGTERM grace before SIGKILL
    quiesce: Seconds = 60.0  # after SIGKILL: processes gone and ports free
    gpu: Seconds = 120.0  # GPU memory back to the baseline
    start: Seconds = 600.0  # launch until the new instance listens on its port
    health: Seconds = 600.0  # health endpoint answers 200
    identity: Seconds = 60.0  # identity is new and config equals the request
    generate: Seconds = 120.0  # consecutive 1-token generations
    request: Seconds = 30.0  # one HTTP request
    engine_check: Seconds = 600.0  # the engine's argument check of every planned config


class Hooks(StrictModel):
    """Shell commands of `control = "hooks"`; start and stop are required there."""

    start: str | None = None  # shell command that starts the service (DDTUNE_* variables set)
    stop: str | None = None  # shell command that stops it
    logs: str | None = None  # shell command that prints its recent log (for failure reports)


class ServiceSpec(StrictModel):
    """How to run one server; see docs/readiness.md "Services".

    Field order matters: the checks of a field see the fields above it.
    """

    # how the service is started: process (ddtune runs the command), systemd (a unit), hooks (your
    # scripts), hot (reconfigured in place); formerly `kind`
    control: Control = "process"
    # which server it is: ddtune, sglang, vllm or openai (any OpenAI-compatible server); formerly
    # `profile`
    engine: str = "ddtune"
    # values of the command's own {placeholders}
    vars: dict[str, VarValue] = Field(default_factory=dict)
    # the launch command, an argv with {placeholders} (mode, budget, topk, window, port, host,
    # vars)
    command: Argv = Field(default=(), validate_default=True)
    # environment of the command ({placeholders} allowed)
    env: dict[str, str] = Field(default_factory=dict)
    port: Annotated[int, Field(ge=1, le=65535)] = 8000  # the port the server listens on
    host: str = "127.0.0.1"  # the address ddtune connects to
    cwd: str | None = None  # working directory of a process service
    # the systemd unit (control = "systemd"): each trial replaces its ExecStart= with a runtime
    # drop-in
    unit: str | None = Field(default=None, validate_default=True)
    systemd_dir: str = "/run/systemd/system"  # where the runtime drop-ins go
    # shell commands of control = "hooks": start, stop, logs
    hooks: Hooks = Field(default_factory=Hooks, validate_default=True)
    health_url: str | None = None  # a health URL other than the engine's own
    # the model name to request (engine = "openai")
    model: str | None = Field(default=None, validate_default=True)
    # 1-token generations that must succeed in a row before READY
    generations: Annotated[int, Field(ge=1)] = 3
    # wait for the GPU memory to return to its baseline after a stop ("off": skip)
    gpu: Literal["auto", "off"] = "auto"
    # MiB above the baseline that still count as released
    gpu_tolerance_mib: Annotated[int, Field(ge=0)] = 256
    reclaim_leftovers: bool = False  # stop a dead runner's ddtune server found on the port
    engine_check: bool = True  # check every launch command with the engine's own parser first
    timeouts: Timeouts = Field(default_factory=Timeouts)  # seconds each phase of a restart may take
    # what `ddtune sweep plan` assumes before a store has measured them (seconds)
    expected_start_s: Annotated[float, Field(ge=0)] | None = None  # stop + start to READY
    expected_bench_s: Annotated[float, Field(ge=0)] | None = None  # one bench

    @classmethod
    def from_dict(cls, table: Mapping[str, Any]) -> ServiceSpec:
        """`parse_table(ServiceSpec, table, where="service")`: the TOML table, every key checked."""
        return parse_table(cls, table, where="service")

    def to_dict(self) -> dict[str, Any]:
        """A TOML-able table (None fields are left out) that from_dict() reads back."""
        return self.model_dump(mode="json", exclude_none=True)

    # ---- the old names, then checks that depend on the control (errors keyed by the field) --

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, table: Any) -> Any:
        """The old names read as the new ones (`RENAMED`)."""
        return new_names(table) if isinstance(table, Mapping) else table

    @field_validator("engine")
    @classmethod
    def _known_engine_hot_needs_ddtune(cls, engine: str, info: ValidationInfo) -> str:
        if engine not in ENGINES:
            raise ValueError(f"must be one of {', '.join(repr(k) for k in ENGINES)}")
        if info.data.get("control") == "hot" and engine != "ddtune":
            raise ValueError(
                "control = 'hot' works with engine = 'ddtune' only (POST /v1/ddtree/config)"
            )
        return engine

    @field_validator("vars")
    @classmethod
    def _no_shadowing(cls, values: dict[str, VarScalar]) -> dict[str, VarScalar]:
        for name in values:
            if name in BUILTIN_PLACEHOLDERS:
                raise ValueError(
                    f"{name!r} shadows the built-in placeholder {{{name}}}; "
                    f"rename service.vars.{name}"
                )
        return values

    @field_validator("command")
    @classmethod
    def _command_fits_control(cls, argv: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        control = info.data.get("control")
        if control in ("process", "hot") and not argv:
            raise ValueError(
                f"must not be empty for control = {control!r} (the server's argv, a list)"
            )
        if "vars" in info.data:  # else the vars error is reported
            for arg in argv:
                _check_placeholders(arg, info.data["vars"])
        return argv

    @field_validator("env")
    @classmethod
    def _env_placeholders(cls, env: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if "vars" in info.data:
            for name, value in env.items():
                _check_placeholders(value, info.data["vars"], f"{name}: ")
        return env

    @field_validator("unit", "model")
    @classmethod
    def _required_by(cls, value: str | None, info: ValidationInfo) -> str | None:
        other, wanted, hint = REQUIRED_WHEN[str(info.field_name)]
        if info.data.get(other) == wanted and not value:
            raise ValueError(f"is required for {other} = {wanted!r} ({hint})")
        return value

    @field_validator("hooks")
    @classmethod
    def _hooks_control_needs_start_stop(cls, hooks: Hooks, info: ValidationInfo) -> Hooks:
        missing = [name for name, cmd in (("start", hooks.start), ("stop", hooks.stop)) if not cmd]
        if info.data.get("control") == "hooks" and missing:
            needed = " and ".join(f"hooks.{name}" for name in missing)
            raise ValueError(f"control = 'hooks' needs {needed} (shell commands)")
        return hooks

    # ---- rendering ----------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def values(
        self, params: DecodeParams, user_vars: Mapping[str, Any] | None = None
    ) -> dict[str, str]:
        """Placeholder values: [service.vars], then the trial's variables, params, port, host."""
        extra = dict(user_vars or {})
        for name in extra:
            if name in BUILTIN_PLACEHOLDERS:
                raise UserError(
                    f"user variable {name!r} shadows the built-in placeholder {{{name}}}",
                    key=f"vars.{name}",
                )
        wire = params.placeholder_values()
        merged = {**self.vars, **extra, **wire, "port": self.port, "host": self.host}
        merged["method"] = params.method or params.mode
        merged["method_args"] = shlex.join(self.method_args(params)[0])
        return {name: str(value) for name, value in merged.items()}

    def method_args(self, params: DecodeParams) -> tuple[list[str], dict[str, str]]:
        """The engine's flags and environment for the trial's method; none where the
        command does not ask for them (`{method_args}`) and the engine cannot spell them."""
        kind = get_engine(self.engine)
        if METHOD_ARGS in self.command:
            return kind.method_args(params)
        try:
            return kind.method_args(params)
        except UserError:
            return [], {}

    def render_argv(
        self, params: DecodeParams, user_vars: Mapping[str, Any] | None = None
    ) -> list[str]:
        values = self.values(params, user_vars)
        argv = []
        for arg in self.command:
            argv += self.method_args(params)[0] if arg == METHOD_ARGS else [arg.format_map(values)]
        return argv

    def render_env(
        self, params: DecodeParams, user_vars: Mapping[str, Any] | None = None
    ) -> dict[str, str]:
        values = self.values(params, user_vars)
        env = {name: text.format_map(values) for name, text in self.env.items()}
        if METHOD_ARGS in self.command:
            env = {**self.method_args(params)[1], **env}
        return env

    def hook_env(
        self, params: DecodeParams, user_vars: Mapping[str, Any] | None = None
    ) -> dict[str, str]:
        """`DDTUNE_<NAME>` for every placeholder value, plus the rendered `env` table."""
        values = self.values(params, user_vars)
        hook_vars = {f"DDTUNE_{name.upper()}": value for name, value in values.items()}
        return {**hook_vars, **self.method_args(params)[1], **self.render_env(params, user_vars)}


def old_names(table: Mapping[str, Any]) -> list[str]:
    """The old names a [service] table uses, each as a one-line note naming the new one."""
    return [
        f"[service] {old} is now called {new}: write {new} = {json.dumps(table[old])} "
        f"({old} still reads)"
        for old, new in RENAMED.items()
        if old in table
    ]


def new_names(table: Mapping[str, Any]) -> dict[str, Any]:
    """The table with its old names (`RENAMED`) as the new ones; both given with different
    values: a `UserError` naming both."""
    renamed = dict(table)
    for old, new in RENAMED.items():
        if old not in renamed:
            continue
        value = renamed.pop(old)
        if new in renamed and renamed[new] != value:
            raise UserError(
                f"both {old} = {json.dumps(value)} and {new} = {json.dumps(renamed[new])} are "
                f"given; {old} is the old name of {new}: keep {new} only",
                key=f"service.{new}",
            )
        renamed[new] = value
    return renamed


def _check_placeholders(text: str, user_vars: Mapping[str, Any], label: str = "") -> None:
    """Every `{name}` in `text` is a built-in or a [service.vars] name; braces are well formed."""
    known = set(BUILTIN_PLACEHOLDERS) | set(user_vars)
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        raise ValueError(
            f"{label}bad placeholder syntax in {text!r} ({exc}); use {{{{ }}}} for literal braces"
        ) from None
    for name in names:
        if name not in known:
            raise ValueError(
                f"{label}{text!r} uses unknown placeholder {{{name}}}; known: "
                f"{', '.join(sorted(known))} (add it to [service.vars])"
            )
