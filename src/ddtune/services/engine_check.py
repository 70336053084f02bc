"""The engine check: the engine's own parser accepts every planned launch command, or nothing runs.

    report = check_launches(spec, launches, workdir)   # launches: (label, params, user vars)
    report.refusals      # one Refusal per launch command the engine refused
    report.lines()       # the summary line, then one line per refusal

A launch command that a new engine release no longer accepts used to show only
after the production service was stopped and its successor had loaded for
minutes. Here, before anything is stopped, every config's command is rendered
(`ServiceSpec.render_argv`, through `python -m ddtune.launchers` where the
command uses it), then ONE engine process (`engines.parser_probe.EngineProbe`,
in the command's own Python) parses and resolves each of them without loading
a model (SGLang: argparse, `resolve_once`, `check_server_args`; vLLM: its CLI,
`validate_parsed_serve_args`, `create_engine_config`); the variables ddtune
sets from parameters must be ones the engine defines. A refusal names the
config, the parameter and the flag behind it, the stage and the engine's own
message and version.

Where it runs as the service would: the command's cwd (`service.cwd`, else the
workdir; an empty temporary folder when that does not exist yet), the
rendered `service.env`, and for a systemd unit its `Environment=`,
`WorkingDirectory=` and `User=` (ddtune switches to that user when it runs as
root; otherwise the report notes that it could not). Skipped, with a note:
`[service] engine_check = false`, an engine without an argument probe (ddtune,
openai), hooks, a systemd unit that keeps its own ExecStart. A command ddtune
cannot map onto an engine (a wrapper script) is a `UserError` that names the
opt-out.
"""

from __future__ import annotations

import os
import string
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ddtune.engines import get_engine
from ddtune.engines.launch import Recognised, engine_command, engine_of
from ddtune.engines.parser_probe import (
    EngineCommand,
    EngineInfo,
    EngineProbe,
    ProbeError,
    Verdict,
    attribute,
)
from ddtune.errors import UserError
from ddtune.methods import SGLANG_FLAGS
from ddtune.params import DecodeParams
from ddtune.services.spec import BUILTIN_PLACEHOLDERS, METHOD_ARGS, ServiceSpec

OPT_OUT = "set [service] engine_check = false to start without the engine's argument check"


@dataclass(frozen=True)
class PlannedLaunch:
    """One planned config: its label, parameters and user variables."""

    label: str
    params: DecodeParams
    user_vars: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Refusal:
    """One launch command the engine refused, and why in its own words."""

    label: str
    stage: str
    message: str
    engine: str  # e.g. "SGLang 0.5.23"
    flag: str | None = None
    parameter: str | None = None

    def line(self) -> str:
        """`LABEL: PARAMETER (FLAG): ENGINE refused it at STAGE: MESSAGE`."""
        what = self.parameter or ("service.command" if self.flag else "the launch command")
        flag = f" ({self.flag})" if self.flag else ""
        return (
            f"{self.label}: {what}{flag}: {self.engine} refused it at {self.stage}: {self.message}"
        )


@dataclass
class EngineCheckReport:
    """What the engine check found; `ok` when nothing was refused (or it was skipped)."""

    checked: int = 0
    refusals: list[Refusal] = field(default_factory=list)
    engine: EngineInfo | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # the engine's notes on accepted commands
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.refusals

    def summary(self) -> str:
        if self.engine is None:
            return "engine check skipped: " + "; ".join(self.notes or ["nothing to check"])
        who = f"{self.engine.name()} ({self.engine.python}, as {self.engine.user})"
        if self.ok:
            text = f"engine check: {who} accepted all {self.checked} launch command(s)"
        else:
            text = f"engine check: {who} refused {len(self.refusals)} of {self.checked} launch command(s)"
        return f"{text} in {self.seconds:.1f} s" + "".join(f"; {n}" for n in self.notes)

    def lines(self) -> list[str]:
        refused = [f"  refused: {r.line()}" for r in self.refusals]
        return [self.summary(), *refused, *(f"  note: {w}" for w in self.warnings)]


def check_launches(
    spec: ServiceSpec, launches: Sequence[PlannedLaunch], workdir: Path
) -> EngineCheckReport:
    """Run the engine's own check on every launch command (see the module docstring)."""
    started = time.monotonic()
    report = EngineCheckReport()
    skip = _skip_reason(spec)
    if skip is not None:
        report.notes.append(skip)
        return report
    rendered = [_render(spec, launch) for launch in launches]
    with ExitStack() as stack:
        where = stack.enter_context(_service_context(spec, workdir))
        where.env.update(rendered[0][3])  # service.env: PYTHONPATH and the like count at start
        probe = stack.enter_context(_probe(spec, rendered[0][1], where))
        report.engine = probe.info()
        report.notes += where.notes(report.engine)
        _check_all(probe, report, rendered, spec, where.cwd)
    report.seconds = time.monotonic() - started
    return report


Rendered = tuple[PlannedLaunch, Recognised, list[str], dict[str, str]]


def _skip_reason(spec: ServiceSpec) -> str | None:
    if not spec.engine_check:
        return "[service] engine_check = false"
    if get_engine(spec.engine).engine is None:
        return f"engine {spec.engine!r} has no argument check of its own"
    if spec.control == "hooks":
        return "control = 'hooks': the hooks start the engine, ddtune cannot see its command"
    if not spec.command:
        return "no service.command: the unit starts with its own ExecStart"
    return None


def _render(spec: ServiceSpec, launch: PlannedLaunch) -> Rendered:
    argv = spec.render_argv(launch.params, launch.user_vars)
    found = engine_of(argv, spec.engine)
    if found is None:
        raise UserError(
            f"engine check: service.command ({' '.join(argv[:4])} ...) runs neither "
            f"`python -m ddtune.launchers {spec.engine}` nor `python -m "
            f"{' | '.join(get_engine(spec.engine).engine_modules)}`, so ddtune cannot run the "
            f"engine's own parser on it; {OPT_OUT}",
            key="service.command",
        )
    return launch, found, argv, spec.render_env(launch.params, launch.user_vars)


def _check_all(
    probe: EngineProbe,
    report: EngineCheckReport,
    rendered: list[Rendered],
    spec: ServiceSpec,
    cwd: str,
) -> None:
    """Each launch command once (identical ones share a verdict); refusals into `report`,
    and the engine's notes on accepted commands into its warnings (each once)."""
    engine = report.engine
    assert engine is not None
    origins = template_origins(spec)
    seen: dict[tuple[Any, ...], Verdict] = {}
    for launch, found, argv, env in rendered:
        _same_python(found, rendered[0][1])
        report.checked += 1
        try:
            mine = {**origins, **method_origins(spec, launch.params)}
            command = _with_origins(engine_command(found, argv, env, engine), mine)
        except UserError as exc:  # ddtune's own builder refused the values
            report.refusals.append(Refusal(launch.label, "ddtune", str(exc), engine.name()))
            continue
        key = (command.args, tuple(sorted(command.env.items())))
        verdict = seen.get(key) or _owned(command, found, engine) or probe.check(command)
        seen[key] = verdict
        if verdict.accepted:
            notes = found.kind.launch_notes(command, cwd)
            report.warnings += [n for n in notes if n not in report.warnings]
        else:
            flag, parameter = attribute(command, verdict)
            refusal = Refusal(
                launch.label, verdict.stage, verdict.message, engine.name(), flag, parameter
            )
            report.refusals.append(refusal)


def _same_python(found: Recognised, first: Recognised) -> None:
    if found.python != first.python:
        raise UserError(
            f"engine check: configs run different engine interpreters ({first.python}, "
            f"{found.python}); {OPT_OUT}",
            key="service.command",
        )


def _owned(command: EngineCommand, found: Recognised, engine: EngineInfo) -> Verdict | None:
    """An extra argument after the launcher's `--` that the engine's parser maps onto a field
    ddtune sets (an alias or an abbreviation of one of its flags)."""
    if found.front is None:
        return None
    for arg in found.front.extra:
        name = str(arg).split("=", 1)[0]
        dest = _dest(name, engine.options)
        if dest is not None and dest in found.kind.owned_fields:
            message = (
                f"{name} sets {dest}, which ddtune sets itself; remove it from the extra arguments"
            )
            return Verdict(False, "ddtune", message, name)
    return None


def _dest(flag: str, options: Mapping[str, str]) -> str | None:
    """The field a flag sets: exact, or by a unique prefix (argparse's abbreviations)."""
    if flag in options:
        return options[flag]
    matches = {
        dest for opt, dest in options.items() if opt.startswith(flag) and flag.startswith("--")
    }
    return matches.pop() if len(matches) == 1 else None


def template_origins(spec: ServiceSpec) -> dict[str, str]:
    """The parameter or variable behind the value of each flag and variable of
    service.command / service.env (`--device {device}` -> vars.device)."""
    origins: dict[str, str] = {}
    command = list(spec.command)
    for i, arg in enumerate(command):
        names = _placeholders(arg)
        if not names:
            continue
        flag = arg.split("=", 1)[0] if arg.startswith("-") else (command[i - 1] if i else "")
        if flag.startswith("-"):
            origins.setdefault(flag, _name(names[0]))
    for variable, text in spec.env.items():
        names = _placeholders(text)
        if names:
            origins[variable] = _name(names[0])
    return origins


def method_origins(spec: ServiceSpec, params: DecodeParams) -> dict[str, str]:
    """The knob behind each flag `{method_args}` renders for a config naming a method
    (SGLang's `--speculative-draft-model-path` -> drafter; vLLM's one JSON -> method)."""
    if METHOD_ARGS not in spec.command or params.method is None:
        return {}
    if spec.engine == "vllm":
        return {"--speculative-config": "method"}
    flags = {SGLANG_FLAGS[key]: key for key, _ in params.method_config().knobs}
    return {"--speculative-algorithm": "method", **flags} if spec.engine == "sglang" else {}


def _placeholders(text: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(text) if name]


def _name(placeholder: str) -> str:
    return placeholder if placeholder in BUILTIN_PLACEHOLDERS else f"vars.{placeholder}"


def _with_origins(command: EngineCommand, origins: Mapping[str, str]) -> EngineCommand:
    """The template's origins added; its environment variables set from placeholders are
    checked like the launcher's (`SGLANG_DDTREE_MAX_TOPK = "{topk}"` in service.env)."""
    from_template = tuple(name for name in origins if not name.startswith("-"))
    checked = tuple(dict.fromkeys((*command.checked_env, *from_template)))
    return replace(command, value_origins={**origins, **command.value_origins}, checked_env=checked)


# ---- where the probe runs: the service's environment, directory and user ------------------


@dataclass
class ServiceContext:
    """The environment, directory and user the service's engine runs with."""

    env: dict[str, str]
    cwd: str
    user: str | None = None
    user_note: str | None = None

    def notes(self, engine: EngineInfo) -> list[str]:
        if self.user and engine.user != self.user:
            return [
                self.user_note or f"the unit runs as {self.user}, the check ran as {engine.user}"
            ]
        return []


@contextmanager
def _service_context(spec: ServiceSpec, workdir: Path) -> Iterator[ServiceContext]:
    if spec.control == "systemd":
        yield _unit_context(spec)
        return
    cwd = Path(spec.cwd) if spec.cwd else Path(workdir)
    if cwd.is_dir():
        yield ServiceContext(dict(os.environ), str(cwd))
        return
    with tempfile.TemporaryDirectory(prefix="ddtune-engine-check-") as empty:
        yield ServiceContext(dict(os.environ), empty)  # the workdir is made at the first start


def _unit_context(spec: ServiceSpec) -> ServiceContext:
    from ddtune.services.controllers.systemd import unit_settings

    settings = unit_settings(spec.unit or "")
    env = {**os.environ, **settings.environment}
    user = settings.user or None
    note = None
    if user and os.geteuid() != 0:
        note = f"the unit runs as {user}; only root can check as that user"
    return ServiceContext(env, settings.working_directory or "/", user, note)


@contextmanager
def _probe(spec: ServiceSpec, found: Recognised, where: ServiceContext) -> Iterator[EngineProbe]:
    engine = found.kind.engine or ""
    try:
        with EngineProbe(
            engine,
            found.python,
            env=where.env,
            cwd=where.cwd,
            user=where.user,
            timeout=spec.timeouts.engine_check,
        ) as probe:
            yield probe
    except ProbeError as exc:
        raise UserError(
            f"engine check: {exc}; fix it, or {OPT_OUT}", key="service.engine_check"
        ) from None


__all__ = ["PlannedLaunch", "EngineCheckReport", "Refusal", "check_launches", "template_origins"]
