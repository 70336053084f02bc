"""The files a launch command names, checked before anything stops (the engine check on or off).

    check_launch_paths(spec, store_path)    # a check before the first stop (before_stop.CHECKS)

Every config's rendered command names an executable (its first word, and the
engine's Python that ddtune's launcher is given with `--python`), a target model
and perhaps a drafter (`services.models.served_models`). Where ddtune runs the
command itself on this machine (`control = "process"` or `"hot"`), each of them
that is written as a local path must be there: a missing one is refused, naming the config, the setting and
the path. Where the command runs under another manager (systemd may run it as
another user, in another root or mount namespace; hooks may start it on another
host), a path absent here may be right there: one note
says so, and that the canary's first start (`ddtune sweep canary SPEC`) checks it.
A model named as a hub id (`org/name`, not a folder here) is the engine's to fetch.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ddtune.errors import UserError
from ddtune.services.models import DRAFTER_FLAGS, TARGET_FLAGS, flag_value, served_models
from ddtune.sweep.spec.parse import SweepSpec

LAUNCHER = ["-m", "ddtune.launchers"]


@dataclass(frozen=True)
class Named:
    """One file a launch command names."""

    what: str  # "the executable", "the target model", ...
    path: str
    config: str  # the label of the first config that names it


def check_launch_paths(spec: SweepSpec, store_path: Path) -> None:
    """Refuse a missing local path where the command runs here; note the others."""
    service = spec.service
    if not service.command:
        return  # a unit's own ExecStart=: systemd reads it, the canary proves it
    missing = [named for named in _named(spec) if not _present(named)]
    if not missing:
        return
    if _runs_here(spec):
        first = missing[0]
        raise UserError(
            f"service.command: {first.what} {first.path} (config {first.config!r}) is not on "
            "this machine, where ddtune runs the command; fix the path in [service] command "
            "or vars",
            key="service.command",
        )
    listed = "; ".join(f"{n.what} {n.path}" for n in missing)
    print(
        f"note: {spec.source}: not on this machine: {listed}. The service runs them "
        f"{_where(spec)}, so they are checked at the first start: prove the path with "
        f"`ddtune sweep canary {spec.source}` (two starts) before the sweep",
        file=sys.stderr,
    )


def _named(spec: SweepSpec) -> list[Named]:
    """The executables and model folders every config's command names, each once."""
    base = Path(spec.base_dir) if spec.base_dir else None
    found: dict[tuple[str, str], Named] = {}
    for config, _ in spec.all_configs():
        params, user = config.params, config.user_vars()
        argv = spec.service.render_argv(params, user)
        label = config.label()
        names = [("the executable", argv[0] if argv else None)]
        if argv[1:3] == LAUNCHER:
            names.append(("the engine's Python (--python)", flag_value(argv, ("--python",))))
        served = served_models(spec.service, params, user, base)
        where = Path(spec.service.cwd or base or ".")
        target = flag_value(argv, TARGET_FLAGS) or (str(served.target) if served.target else None)
        drafter = flag_value(argv, DRAFTER_FLAGS) or (
            str(served.drafter) if served.drafter else None
        )
        names += [("the target model", _local(target, where))]
        names += [("the drafter", _local(drafter, where))]
        for what, path in names:
            if path:
                found.setdefault((what, path), Named(what, path, label))
    return list(found.values())


def _local(written: str | None, where: Path) -> str | None:
    """A model path written as a local one (absolute, ./, ../, ~), resolved against the
    service's folder; None for anything else (a hub id such as `org/name` or `gpt2`)."""
    if not written or not written.startswith(("/", "./", "../", "~")):
        return None
    path = Path(written).expanduser()
    return str(path if path.is_absolute() else where / written)


def _present(named: Named) -> bool:
    if named.what == "the executable" and "/" not in named.path:
        return shutil.which(named.path) is not None
    path = Path(named.path).expanduser()
    if named.what.startswith(("the executable", "the engine's Python")):
        return path.is_file() and os.access(path, os.X_OK)
    return path.exists()


def _runs_here(spec: SweepSpec) -> bool:
    """Does ddtune itself run the command on this machine (process and hot control, no Ray
    slots on other nodes)?"""
    return spec.service.control in ("process", "hot") and spec.cluster.backend == "local"


def _where(spec: SweepSpec) -> str:
    service = spec.service
    if spec.cluster.backend == "ray":
        return "on the Ray slots' nodes"
    if service.control == "systemd":
        return f"under systemd (unit {service.unit}: its user, root and mounts)"
    return "through your hooks (perhaps on another machine)"


__all__ = ["check_launch_paths"]
