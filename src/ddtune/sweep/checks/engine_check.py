"""The sweep's engine check: every planned config's launch command past the engine's own parser.

    report = check_engine(spec, workdir)      # raises EngineRefused when the engine refuses one
    print("\\n".join(report.lines()))

`run_sweep` calls it before it opens the store or touches the service (so a
refused config stops the sweep with exit code 2 and nothing stopped or
started); `ddtune sweep plan` shows the same lines. The planned configs are
the grid's (baseline included), or for a search space (strategy "optuna") a
covering set: every value of every dimension at least once
(`SearchSpace.covering`). See `ddtune.services.engine_check`.
"""

from __future__ import annotations

from pathlib import Path

from ddtune.errors import UserError
from ddtune.services.engine_check import OPT_OUT, EngineCheckReport, PlannedLaunch, check_launches
from ddtune.sweep.spec.parse import Config, SweepSpec


class EngineRefused(UserError):
    """The engine refused some planned configs: nothing may run (the CLI exits 2)."""

    def __init__(self, report: EngineCheckReport) -> None:
        self.report = report
        head = (
            f"the engine refused {len(report.refusals)} of {report.checked} planned launch "
            f"command(s); nothing was stopped or started (fix the spec, or {OPT_OUT}):"
        )
        super().__init__("\n".join([head, *(f"  {r.line()}" for r in report.refusals)]))


def planned_launches(spec: SweepSpec) -> list[PlannedLaunch]:
    """Every config the sweep may launch: the grid's, or a search space's covering set."""
    configs = [config for config, _ in spec.all_configs()]
    if spec.search is not None:
        configs += [Config(p, tuple(sorted(v.items()))) for p, v in spec.search.covering()]
    return [launch_of(c) for c in dict.fromkeys(configs)]


def launch_of(config: Config) -> PlannedLaunch:
    return PlannedLaunch(config.label(), config.params, config.user_vars())


def check_engine(
    spec: SweepSpec, workdir: Path, configs: list[Config] | None = None
) -> EngineCheckReport:
    """`check_launches` over `configs` (default: `planned_launches`); `EngineRefused`
    when anything was refused."""
    launches = planned_launches(spec) if configs is None else [launch_of(c) for c in configs]
    report = check_launches(spec.service, launches, workdir)
    if not report.ok:
        raise EngineRefused(report)
    return report


__all__ = ["EngineRefused", "EngineCheckReport", "check_engine", "planned_launches"]
