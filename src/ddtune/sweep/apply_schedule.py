"""`ddtune sweep apply --schedule [FILE]`: make a schedule the service's lasting configuration.

    code = apply_schedule(store, sweep, source=None, dry_run=False, console=console)

The schedule: the report's (`report.schedule`, from the sweep's load levels)
or a FILE (a report's results.json, its schedule.json, or the list itself).
It is applied like a single config (`sweep/apply.py`): the command that serves
it (`ddtune.services.scheduled`: `ddtune serve --schedule FILE`, vLLM's
`num_speculative_tokens_per_batch_size`, SGLang's adaptive config, else the
config for the typical concurrency, said as such) passes the engine check for
its config, then by service control:

    systemd   a persistent drop-in (and the schedule file beside it, named by its
              hash), daemon-reload, stop, start, READY by the full protocol against
              the command's config; not READY: rolled back; `--revert` as for a config
    process   the exact launch command, the schedule file written under the store's
    hooks     folder: ddtune starts nothing lasting
    hot       refused: a schedule is a start-up setting; apply one config (`--config`)
              or restart the server with `ddtune serve --schedule FILE`

`--dry-run` says what would happen and changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ddtune.engines.launch import command_line
from ddtune.engines.schedule import Schedule, read_schedule
from ddtune.errors import UserError
from ddtune.services import ServiceSpec
from ddtune.services.applied_dropin import applied_dropin, apply_lasting
from ddtune.services.scheduled import ScheduledLaunch, scheduled_launch
from ddtune.sweep.checks.engine_check import check_engine
from ddtune.sweep.reporting import analyze_stored, stored_spec
from ddtune.sweep.spec.parse import Config
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.rows import SweepRow


def apply_schedule(
    store: Store, sweep: SweepRow, source: str | None, dry_run: bool, console: Console
) -> int:
    """Apply the report's schedule (or the one in `source`) to the sweep's service."""
    spec = stored_spec(store, sweep)
    service = spec.service
    if service.control == "hot":
        raise UserError(
            "a schedule is set when the server starts: control = 'hot' applies one config "
            "(`sweep apply --config LABEL`), or restart it with `ddtune serve --schedule FILE`"
        )
    schedule, typical, why = chosen_schedule(store, sweep, source)
    console.print(f"schedule: {escape(schedule.describe())} ({escape(why)})")
    workdir = store.path.parent.resolve()
    folder = applied_dropin(service).path.parent if service.control == "systemd" else workdir
    launch = scheduled_launch(service, schedule, folder, typical)
    console.print(escape(launch.words))
    tier = launch.tier
    check_engine(spec, workdir, [Config(tier.params, tuple(sorted(tier.vars.items())))])
    if service.control != "systemd":
        return _print(service, launch, dry_run, console)
    lines, code = apply_lasting(
        service,
        tier.params,
        tier.vars,
        f"{why}, sweep {sweep['name']}",
        workdir,
        "the schedule",
        dry_run,
        launch.argv,
        launch.files,
    )
    return _said(lines, code, console)


def chosen_schedule(store: Store, sweep: SweepRow, source: str | None) -> tuple[Schedule, int, str]:
    """(the schedule, the typical concurrency, where it came from)."""
    if source is not None:
        path = Path(source)
        return read_schedule(path), _typical_in(path), f"from {path}"
    found = analyze_stored(store, sweep).schedule
    if found is None:
        raise UserError(
            f"sweep {sweep['name']!r} measured no closed-loop load levels ([bench.load] "
            "concurrency), so its report has no schedule; add them, or pass --schedule FILE"
        )
    return found.schedule, int(found.typical[1:]), "the report's schedule"


def _typical_in(path: Path) -> int:
    """The typical concurrency a report's results.json names (1 without one)."""
    try:
        choice = json.loads(path.read_text()).get("report", {}).get("schedule_choice") or {}
        return int(str(choice.get("typical_level") or "c1")[1:])
    except (AttributeError, ValueError):
        return 1


def _said(lines: list[str], code: int, console: Console) -> int:
    """`lines` printed as they are (no markup); `code`, the exit code."""
    for line in lines:
        console.print(line, markup=False, highlight=False)
    return code


def _print(service: ServiceSpec, launch: ScheduledLaunch, dry_run: bool, console: Console) -> int:
    for path, text in launch.files.items():
        if dry_run:
            console.print(f"would write {path}", highlight=False)
        else:
            path.write_text(text)
            console.print(f"wrote {path}", highlight=False)
    env = service.render_env(launch.tier.params, launch.tier.vars)
    console.print(f"control = {service.control!r}: ddtune keeps nothing running; serve it with:")
    console.print(escape(command_line(env, launch.argv)), highlight=False, soft_wrap=True)
    return 0


__all__ = ["apply_schedule", "chosen_schedule"]
