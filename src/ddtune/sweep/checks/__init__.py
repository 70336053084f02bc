"""Every check before the first stop: a spec's mistakes, then the engine's own parser.

    checked = check_sweep(spec, store_path)    # once per command, before anything is stopped
    print("\\n".join(checked.lines()))

A mistake is a `UserError` (exit 2) naming the key and the fix; a launch
command the engine refuses is `EngineRefused` (exit 2); nothing is stopped or
started either way.

    before_stop     `CHECKS`: the bench's files, the store's folder, budgets, the drafter's
                    depth, windows the bench can tell apart, the keys and paths below
    drafter_depth   no config drafts more tokens a round than its drafter's block allows
    launch_axes     every swept key reaches the launch (command, environment, hot body)
    launch_paths    the executables and models a launch command names
    engine_check    every planned launch command past the engine's own parser
"""

from __future__ import annotations

from pathlib import Path

from ddtune.services.engine_check import EngineCheckReport
from ddtune.sweep.checks.before_stop import CHECKS, check_before_stopping
from ddtune.sweep.checks.engine_check import EngineRefused, check_engine, planned_launches
from ddtune.sweep.spec.parse import SweepSpec


def check_sweep(spec: SweepSpec, store_path: Path) -> EngineCheckReport:
    """`check_before_stopping`, then `check_engine` over every planned launch command."""
    check_before_stopping(spec, store_path)
    return check_engine(spec, store_path.parent.resolve())


__all__ = [
    "CHECKS",
    "EngineCheckReport",
    "EngineRefused",
    "check_before_stopping",
    "check_engine",
    "check_sweep",
    "planned_launches",
]
