"""GPU probes: baseline arithmetic, nvidia-smi parsing (FAKE nvidia-smi), the no-GPU note."""

from __future__ import annotations

import os
import shutil

import pytest

from ddtune.services.gpu import GpuDevice, NvidiaSmiProbe, baseline, default_probe, not_released


def test_baseline_removes_the_old_instance_and_checks_release():
    running = [GpuDevice(0, 9000, {111: 8000}), GpuDevice(1, 300)]
    base = baseline(running, {111})
    assert base.used_mib == {0: 1000, 1: 300}
    assert "old pids [111]" in not_released(running, base, 256)
    assert "GPU 0: 5000 MiB" in not_released([GpuDevice(0, 5000), GpuDevice(1, 300)], base, 256)
    assert not_released([GpuDevice(0, 1100), GpuDevice(1, 310)], base, 256) is None


def test_nvidia_smi_fallback_parses_each_gpu(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"  # a FAKE nvidia-smi: no GPU on this machine
    fake.write_text("#!/bin/sh\nprintf '0, 1234\\n1, 20\\n'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert NvidiaSmiProbe().read() == [GpuDevice(0, 1234.0), GpuDevice(1, 20.0)]


def test_gpu_off_is_a_note():
    probe, note = default_probe("off")
    assert probe is None and "gpu = 'off'" in note


@pytest.mark.skipif(
    shutil.which("nvidia-smi") is not None, reason="this machine has an NVIDIA driver"
)
def test_no_gpu_is_skipped_with_a_note():
    probe, note = default_probe("auto")
    assert probe is None and note == "GPU check skipped: no NVIDIA GPU"
