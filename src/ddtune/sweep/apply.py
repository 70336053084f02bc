"""`ddtune sweep apply`: make the recommendation (or a named config) the service's lasting one.

    code = apply_config(store, sweep, label=None, dry_run=False, console=console)
    code = revert_config(store, sweep, dry_run=False, console=console)

The config: `--config LABEL` (a trial label of the sweep), else the report's
headline recommendation when it is `separated` or `equivalent` (an
inconclusive sweep names no winner: apply one by name). Its launch command
passes the engine's own parser first (the engine check), then, by service control:

    systemd   a persistent drop-in beside the unit (`services/applied_dropin.py`), daemon-reload,
              stop, start and the full readiness protocol; not READY: rolled back
    process   the exact launch command (environment and argv; for the launcher front
              also the engine command it runs): ddtune starts nothing lasting
    hooks     the DDTUNE_* variables the start hook would get, likewise
    hot       POST /v1/ddtree/config to the running server through the hot protocol;
              its previous config is kept in `<store dir>/applied.json` for --revert

`--dry-run` says what would happen and changes nothing. `--revert` restores
what was there before the last apply. Exit codes: 0 done (or nothing to do),
1 the service did not become READY (a systemd apply is rolled back first),
2 bad input. See docs/engines.md "Applying the result".
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from ddtune.engines.launch import build, command_line, engine_of, env_words
from ddtune.engines.parser_probe import EngineInfo
from ddtune.errors import UserError
from ddtune.services import Outcome, ServiceSpec, build_controller
from ddtune.services.applied_dropin import applied_dropin, apply_lasting, revert_dropin
from ddtune.sweep.checks.engine_check import check_engine
from ddtune.sweep.plan.strategies.race import sweep_configs
from ddtune.sweep.reporting import analyze_stored, stored_spec
from ddtune.sweep.spec.parse import Config
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.rows import SweepRow

DECIDED = ("separated", "equivalent")
RECORD = "applied.json"


def apply_config(
    store: Store, sweep: SweepRow, label: str | None, dry_run: bool, console: Console
) -> int:
    """Apply `label` (or the recommendation) to the sweep's service; the exit code."""
    spec = stored_spec(store, sweep)
    config, why = chosen_config(store, sweep, label)
    console.print(f"config: {escape(config.label())} ({escape(why)})")
    workdir = store.path.parent.resolve()
    report = check_engine(spec, workdir, [config])
    if report.engine is not None:
        console.print(escape("\n".join(report.lines())))
    control = spec.service.control
    if control == "systemd":
        lines, code = apply_lasting(
            spec.service,
            config.params,
            config.user_vars(),
            origin(store, sweep, config),
            workdir,
            config.label(),
            dry_run,
        )
        return _print_lines(lines, code, console)
    if control == "hot":
        return _apply_hot(spec.service, config, workdir, dry_run, console)
    _print_command(spec.service, config, report.engine, console)
    return 0


def revert_config(store: Store, sweep: SweepRow, dry_run: bool, console: Console) -> int:
    """Undo the last apply: the previous drop-in (systemd) or config (hot)."""
    spec = stored_spec(store, sweep)
    workdir = store.path.parent.resolve()
    control = spec.service.control
    if control == "systemd":
        return _revert_systemd(spec.service, workdir, dry_run, console)
    if control == "hot":
        return _revert_hot(spec.service, workdir, dry_run, console)
    console.print(
        f"nothing to revert: for control = {control!r} `sweep apply` only prints the launch command; "
        "stop the server you started with it"
    )
    return 0


def chosen_config(store: Store, sweep: SweepRow, label: str | None) -> tuple[Config, str]:
    """(the config, why it was chosen): `label`, else the headline recommendation."""
    configs = {config.label(): config for config, _ in sweep_configs(store, sweep["id"])}
    if label is not None:
        if label not in configs:
            known = ", ".join(repr(k) for k in configs)
            raise UserError(
                f"--config {label!r} is not a config of sweep {sweep['name']!r}: {known}"
            )
        return configs[label], "named by --config"
    recommendation = analyze_stored(store, sweep).recommendations[0]
    if recommendation.status not in DECIDED or recommendation.label not in configs:
        raise UserError(
            f"the sweep's {recommendation.objective} recommendation is {recommendation.status}: "
            f"{recommendation.text} Pass --config LABEL to apply one of {', '.join(configs)}"
        )
    why = f"recommended for {recommendation.objective}: {recommendation.status}"
    return configs[recommendation.label], why


def origin(store: Store, sweep: SweepRow, config: Config) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    return f"store {store.path.resolve()}, sweep {sweep['name']}, config {config.label()}, {when}"


# ---- systemd -------------------------------------------------------------------------------


def _print_lines(lines: list[str], code: int, console: Console) -> int:
    """`lines` printed as they are (no markup); `code`, the exit code."""
    for line in lines:
        console.print(line, markup=False, highlight=False)
    return code


def _revert_systemd(service: ServiceSpec, workdir: Path, dry_run: bool, console: Console) -> int:
    plan = applied_dropin(service)
    if not plan.path.exists():
        console.print(f"nothing to revert: {plan.path} does not exist")
        return 0
    back = plan.previous if plan.previous.exists() else None
    if dry_run:
        what = f"put {back.name} back" if back else f"remove {plan.path}"
        console.print(f"would {what}, daemon-reload, stop and start {plan.unit}, wait for READY")
        return 0
    outcome = revert_dropin(service, plan, workdir / "apply" / plan.unit)
    restored = "the previous applied config" if back else "the unit's own configuration"
    return _said(outcome, f"reverted {plan.unit} to {restored}", console)


def _said(outcome: Outcome, done: str, console: Console) -> int:
    if outcome.ready:
        console.print(f"{done}: READY in {outcome.timings.get('start_to_ready_s', 0):.1f} s")
        return 0
    console.print(f"[red]not READY[/]: {outcome.failure} — {escape(outcome.detail)}")
    return 1


# ---- process, hooks: the command to run ------------------------------------------------------


def _print_command(
    service: ServiceSpec, config: Config, checked: EngineInfo | None, console: Console
) -> None:
    """The exact command (and environment) that serves `config`; `checked`: the engine the
    engine check asked, if it ran."""
    params, user_vars = config.params, config.user_vars()
    if service.control == "hooks":
        env = service.hook_env(params, user_vars)
        console.print(f"the start hook serves {escape(config.label())} with these variables:")
        console.print(escape(env_words(env)), highlight=False, soft_wrap=True)
        return
    argv = service.render_argv(params, user_vars)
    env = service.render_env(params, user_vars)
    where = f" (in {service.cwd})" if service.cwd else ""
    console.print(
        f"control = {service.control!r}: ddtune keeps nothing running; serve it with{where}:"
    )
    console.print(escape(command_line(env, argv)), highlight=False, soft_wrap=True)
    engine = _engine_command(service, argv, checked)
    if engine:
        console.print("which runs:\n" + escape(engine), highlight=False, soft_wrap=True)


def _engine_command(service: ServiceSpec, argv: list[str], engine: EngineInfo | None) -> str | None:
    """For `python -m ddtune.launchers`: the engine command it execs (its `--print`);
    `engine`, the engine check's, spares the launcher asking the engine again."""
    found = engine_of(argv, service.engine)
    if found is None or found.front is None:
        return None
    built, added = build(found.front, engine)
    return command_line(added, built)


# ---- hot: in place, the previous config kept for --revert ------------------------------------


def _apply_hot(
    service: ServiceSpec, config: Config, workdir: Path, dry_run: bool, console: Console
) -> int:
    from ddtune.services.controllers.hot import HotController

    controller = build_controller(service, workdir)
    assert isinstance(controller, HotController)
    serving = controller.serving()
    if not serving:
        raise UserError(f"no ddtune server answers on {service.base_url}; start it, then apply")
    if dry_run:
        console.print(
            f"would POST {config.params.to_wire()} to {service.base_url}/v1/ddtree/config "
            f"(now {serving.get('config')})"
        )
        return 0
    outcome = controller.reconfigure(config.params, workdir / "apply" / "hot")
    if outcome.ready:
        record = {"kind": "hot", "applied": config.to_wire(), "previous": serving.get("config")}
        (workdir / RECORD).write_text(json.dumps(record, indent=1) + "\n")
    return _said(outcome, f"applied {config.label()} in place", console)


def _revert_hot(service: ServiceSpec, workdir: Path, dry_run: bool, console: Console) -> int:
    from ddtune.params import DecodeParams

    path = workdir / RECORD
    record: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    if record.get("kind") != "hot" or not isinstance(record.get("previous"), dict):
        console.print(f"nothing to revert: no hot apply recorded in {path}")
        return 0
    previous = DecodeParams.from_wire(record["previous"], "previous")
    if dry_run:
        console.print(f"would POST {previous.to_wire()} to {service.base_url}/v1/ddtree/config")
        return 0
    outcome = build_controller(service, workdir).reconfigure(
        previous, workdir / "apply" / "hot-revert"
    )
    if outcome.ready:
        path.unlink()
    return _said(outcome, f"reverted to {previous.label()} in place", console)


__all__ = ["apply_config", "chosen_config", "revert_config"]
