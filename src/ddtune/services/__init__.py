"""Service controllers and the race-free readiness protocol.

    from ddtune.services import ServiceSpec, build_controller, Outcome
    spec = ServiceSpec.from_dict(table)            # the sweep's [service] table
    controller = build_controller(spec, workdir)
    outcome = controller.reconfigure(params, attempt_dir)   # READY or a failure class
    controller.close()                             # nothing left running

See `protocol.py` for the protocol and docs/architecture.md "Services".
"""

from __future__ import annotations

from pathlib import Path

from ddtune.services.gpu import GpuDevice, GpuProbe
from ddtune.services.outcome import Outcome
from ddtune.services.protocol import Controller
from ddtune.services.spec import ServiceSpec, Timeouts


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
    "Controller",
    "GpuDevice",
    "GpuProbe",
    "Outcome",
    "ServiceSpec",
    "Timeouts",
    "build_controller",
]
