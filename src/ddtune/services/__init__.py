"""Service controllers and the race-free readiness protocol.

    from ddtune.services import PHASES, ServiceSpec, build_controller
    spec = parse_table(ServiceSpec, table, where="service")   # the sweep's [service] table
    controller = build_controller(spec, workdir)
    outcome = controller.reconfigure(params, attempt_dir, user_vars=..., on_phase=...)
    controller.close()                             # nothing left running

`params` is a `DecodeParams`; `on_phase(name)` hears each name of `PHASES` as
that step starts. See `protocol.py` and docs/architecture.md "Services".
"""

from __future__ import annotations

from pathlib import Path

from ddtune.services.gpu import GpuDevice, GpuProbe
from ddtune.services.outcome import Outcome
from ddtune.services.protocol import PHASES, Controller
from ddtune.services.spec import Hooks, ServiceSpec, Timeouts


def build_controller(
    spec: ServiceSpec, workdir: Path, gpu_probe: GpuProbe | None = None
) -> Controller:
    """The controller for `spec.kind`; `gpu_probe` overrides NVML/nvidia-smi (tests)."""
    if spec.kind == "process":
        from ddtune.services.process import ProcessController

        return ProcessController(spec, Path(workdir), gpu_probe)
    if spec.kind == "systemd":
        from ddtune.services.systemd import SystemdController

        return SystemdController(spec, Path(workdir), gpu_probe)
    if spec.kind == "hooks":
        from ddtune.services.hooks import HooksController

        return HooksController(spec, Path(workdir), gpu_probe)
    from ddtune.services.hot import HotController

    return HotController(spec, Path(workdir), gpu_probe)


__all__ = [
    "PHASES",
    "Controller",
    "GpuDevice",
    "GpuProbe",
    "Hooks",
    "Outcome",
    "ServiceSpec",
    "Timeouts",
    "build_controller",
]
