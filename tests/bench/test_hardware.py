"""hardware_fingerprint describes this machine and is stable between calls."""

from __future__ import annotations

import os

from ddtune.bench import hardware_fingerprint


def test_fingerprint_fields_and_stability() -> None:
    info = hardware_fingerprint()
    assert info["cpu_cores"] == os.cpu_count()
    assert isinstance(info["cpu_model"], str) and info["cpu_model"]
    assert isinstance(info["gpu_names"], list) and len(info["gpu_names"]) == len(
        info["gpu_memory_mib"]
    )
    assert len(info["fingerprint"]) == 16
    assert hardware_fingerprint()["fingerprint"] == info["fingerprint"]
