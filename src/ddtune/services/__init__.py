"""Service controllers and the race-free readiness protocol.

    from ddtune.services import PHASES, ServiceSpec, build_controller
    spec = parse_table(ServiceSpec, table, where="service")   # the sweep's [service] table
    controller = build_controller(spec, workdir)
    outcome = controller.reconfigure(params, attempt_dir, user_vars=..., on_phase=...)
    controller.close()                             # nothing left running

`params` is a `DecodeParams`; `on_phase(name)` hears each name of `PHASES` as
that step starts. See `protocol.py` and docs/readiness.md "Services".
"""

from __future__ import annotations

from pathlib import Path

from ddtune.services.gpu import GpuDevice, GpuProbe
from ddtune.services.leftovers import Owner
from ddtune.services.outcome import Outcome
from ddtune.services.protocol import PHASES, Controller
from ddtune.services.spec import Hooks, ServiceSpec, Timeouts


def build_controller(
    spec: ServiceSpec,
    workdir: Path,
    gpu_probe: GpuProbe | None = None,
    owner: Owner | None = None,
) -> Controller:
    """The controller for `spec.control`; `gpu_probe` overrides NVML/nvidia-smi (tests).

    `owner` names who starts the instances (a sweep runner passes its sweep
    and store); by default this process.
    """
    controller = _controller_class(spec)(spec, Path(workdir), gpu_probe)
    if owner is not None:
        controller.owner = owner
    return controller


def _controller_class(spec: ServiceSpec) -> type[Controller]:
    if spec.control == "process":
        from ddtune.services.controllers.process import ProcessController

        return ProcessController
    if spec.control == "systemd":
        from ddtune.services.controllers.systemd import SystemdController

        return SystemdController
    if spec.control == "hooks":
        from ddtune.services.controllers.hooks import HooksController

        return HooksController
    from ddtune.services.controllers.hot import HotController

    return HotController


__all__ = [
    "PHASES",
    "Controller",
    "GpuDevice",
    "GpuProbe",
    "Hooks",
    "Owner",
    "Outcome",
    "ServiceSpec",
    "Timeouts",
    "build_controller",
]
