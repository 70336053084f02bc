"""Hardware fingerprint: what a result was measured on, so only like is compared with like.

CPU model and core count from /proc/cpuinfo and os; GPU names, memory and
driver from NVML (`nvidia-ml-py`) when it loads, else `nvidia-smi` when it is
on PATH; no GPU is a valid answer. `fingerprint` is a short hash of the parts
that change performance (CPU model, cores, GPU names, driver).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any


def hardware_fingerprint() -> dict[str, Any]:
    """CPU/GPU description plus `fingerprint`, a 16-hex-digit hash of its stable parts."""
    info: dict[str, Any] = {
        "cpu_model": _cpu_model(),
        "cpu_cores": os.cpu_count() or 0,
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "machine": platform.machine(),
        "system": platform.system(),
        "python": platform.python_version(),
    }
    info.update(_gpus())
    stable = {k: info[k] for k in ("cpu_model", "cpu_cores", "gpu_names", "gpu_driver")}
    text = json.dumps(stable, sort_keys=True)
    info["fingerprint"] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return info


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _gpus() -> dict[str, Any]:
    found = _gpus_nvml() or _gpus_smi()
    if found is None:
        return {"gpu_names": [], "gpu_memory_mib": [], "gpu_driver": None, "gpu_source": None}
    return found


def _gpus_nvml() -> dict[str, Any] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        names = [_text(pynvml.nvmlDeviceGetName(h)) for h in handles]
        memory = [pynvml.nvmlDeviceGetMemoryInfo(h).total // (1024 * 1024) for h in handles]
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
    finally:
        pynvml.nvmlShutdown()
    return {
        "gpu_names": names,
        "gpu_memory_mib": memory,
        "gpu_driver": driver,
        "gpu_source": "nvml",
    }


def _gpus_smi() -> dict[str, Any] | None:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    query = "--query-gpu=name,memory.total,driver_version"
    try:
        out = subprocess.run(
            [smi, query, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    rows = [
        [c.strip() for c in line.split(",")] for line in out.stdout.splitlines() if line.strip()
    ]
    if out.returncode != 0 or not rows:
        return None
    return {
        "gpu_names": [r[0] for r in rows],
        "gpu_memory_mib": [int(float(r[1])) for r in rows],
        "gpu_driver": rows[0][2],
        "gpu_source": "nvidia-smi",
    }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
