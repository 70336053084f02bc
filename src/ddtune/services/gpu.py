"""GPU memory per device, for the quiesce step: NVML first, `nvidia-smi` as a fallback.

A `GpuProbe` returns one `GpuDevice` per GPU (used MiB and the MiB each PID
holds) or None when the machine has no NVIDIA GPU; the protocol then records
the note "GPU check skipped: no NVIDIA GPU". Tests inject their own probe.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class GpuDevice:
    index: int
    used_mib: float
    processes: dict[int, float] = field(default_factory=dict)  # pid -> MiB


class GpuProbe(Protocol):
    name: str

    def read(self) -> list[GpuDevice] | None:
        """Current memory per GPU; None when there is no GPU to check."""


class NvmlProbe:
    """NVIDIA Management Library through nvidia-ml-py (`pynvml`)."""

    name = "nvml"

    def __init__(self) -> None:
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml

    def read(self) -> list[GpuDevice] | None:
        nvml = self._nvml
        devices = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            used = nvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20
            procs = {}
            try:
                for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    procs[proc.pid] = (proc.usedGpuMemory or 0) / 2**20
            except nvml.NVMLError:
                pass
            devices.append(GpuDevice(index, used, procs))
        return devices or None


class NvidiaSmiProbe:
    """`nvidia-smi --query-gpu=index,memory.used` (per-process usage not attributed)."""

    name = "nvidia-smi"

    def read(self) -> list[GpuDevice] | None:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        devices = [
            GpuDevice(int(i), float(m))
            for i, m in (line.split(",") for line in out.splitlines() if line.strip())
        ]
        return devices or None


def default_probe(mode: str) -> tuple[GpuProbe | None, str | None]:
    """The probe for `gpu = auto|off`, and a note when the check is skipped."""
    if mode == "off":
        return None, "GPU check skipped: gpu = 'off' in [service]"
    try:
        probe = NvmlProbe()
        if probe.read():
            return probe, None
    except Exception:  # NVML missing or no driver: try the CLI
        pass
    if shutil.which("nvidia-smi"):
        try:
            smi = NvidiaSmiProbe()
            if smi.read():
                return smi, None
        except (subprocess.SubprocessError, OSError, ValueError):
            pass
    return None, "GPU check skipped: no NVIDIA GPU"


@dataclass(frozen=True)
class GpuBaseline:
    """Memory per GPU with the old instance's own usage taken out."""

    used_mib: dict[int, float]
    old_pids: frozenset[int]


def baseline(devices: list[GpuDevice], old_pids: set[int]) -> GpuBaseline:
    used = {
        d.index: d.used_mib - sum(m for p, m in d.processes.items() if p in old_pids)
        for d in devices
    }
    return GpuBaseline(used, frozenset(old_pids))


def not_released(devices: list[GpuDevice], base: GpuBaseline, tolerance_mib: float) -> str | None:
    """None when every GPU is back to its baseline; else what is still held."""
    held = []
    for d in devices:
        limit = base.used_mib.get(d.index, 0.0) + tolerance_mib
        pids = sorted(p for p in d.processes if p in base.old_pids)
        if d.used_mib > limit or pids:
            held.append(
                f"GPU {d.index}: {d.used_mib:.0f} MiB used, baseline {limit - tolerance_mib:.0f} MiB"
                + (f", old pids {pids}" if pids else "")
            )
    return "; ".join(held) or None
