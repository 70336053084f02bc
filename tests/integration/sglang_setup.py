"""Helpers for the live SGLang tests: SGLang 0.5.23 in its own venv, run on this CPU.

`ensure_sglang_venv()` builds `.venv-sglang` in the repository root (gitignored)
once; later calls only check that it imports (the stamp file names the version):

    1. torch==2.13.0 alone: the local CPU wheel (any other torch downloads CUDA builds)
    2. sglang==0.5.23 --no-deps: its metadata pins torch 2.14.1, flashinfer,
       sglang-kernel and ~60 CUDA packages, none of which can run here
    3. requirements-sglang-cpu.txt --no-deps: exact pins of what SGLang imports
    4. torchvision / sglang-kernel / flashinfer removed should anything have brought them

On this CPU SGLang also needs two WORKAROUNDS, test-only stand-ins that
`cpu_env()` puts on PYTHONPATH (`sglang_cpu_workarounds/`, see its README):
`torchvision` (the PyPI wheel is a CUDA build that fails to import beside CPU
torch) and `sgl_kernel` (no CPU wheel on PyPI). `cpu_env()` and `CPU_FLAGS`
carry the rest of the recipe: `SGLANG_USE_CPU_ENGINE=1` (the CPU platform),
`--device cpu --attention-backend torch_native` and `--max-total-tokens`
(without it SGLang reserves ~70 % of RAM for its KV cache). docs/engines.md
"SGLang on this CPU" has the measured timings.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

from vllm_setup import REPO, nice_prefix

VENV = REPO / ".venv-sglang"
SGLANG_PYTHON = VENV / "bin" / "python"
STAMP = VENV / ".ddtune-sglang-ok"
SGLANG_VERSION = "0.5.23"
TORCH_VERSION = "2.13.0"
HERE = Path(__file__).resolve().parent
WORKAROUNDS = HERE / "sglang_cpu_workarounds"
REQUIREMENTS = HERE / "requirements-sglang-cpu.txt"
TARGET = REPO / "src" / "ddtune" / "assets" / "models" / "target"
DRAFTER = REPO / "src" / "ddtune" / "assets" / "models" / "drafter"
NOT_HERE = ("torchvision", "sglang-kernel", "sgl-kernel", "flashinfer-python")
CPU_FLAGS = ("--device", "cpu", "--attention-backend", "torch_native", "--max-total-tokens", "4096")
PIP = ["-m", "pip", "install", "-q", "--disable-pip-version-check"]
IMPORT_CHECK = (
    "import importlib.metadata as m, sgl_kernel, torchvision, torch;"
    "import sglang.srt.entrypoints.http_server, sglang.srt.models.qwen3;"
    "assert sgl_kernel.IS_DDTUNE_WORKAROUND and torchvision.IS_DDTUNE_WORKAROUND;"
    "assert torch.__version__.endswith('+cpu'), torch.__version__;"
    "print(m.version('sglang'))"
)


def cpu_env() -> dict[str, str]:
    """The environment additions every SGLang process of these tests runs with."""
    return {
        "SGLANG_USE_CPU_ENGINE": "1",  # the CPU platform (no accelerator here)
        "PYTHONPATH": str(WORKAROUNDS),  # the two stand-ins
        "HF_HUB_OFFLINE": "1",  # no hub: a model path that is not a folder fails at once
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


@functools.cache
def ensure_sglang_venv() -> Path:
    """The venv's python, building it on first use (about 1.5 minutes here, 2.4 GB); checked
    once per test session."""
    if not STAMP.exists():
        if not SGLANG_PYTHON.exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        steps = [
            [*PIP, f"torch=={TORCH_VERSION}"],
            [*PIP, "--no-deps", f"sglang=={SGLANG_VERSION}"],
            [*PIP, "--no-deps", "-r", str(REQUIREMENTS)],
            ["-m", "pip", "uninstall", "-q", "-y", *NOT_HERE],
        ]
        for step in steps:
            subprocess.run([*nice_prefix(), str(SGLANG_PYTHON), *step], check=True, timeout=3600)
    probe = subprocess.run(
        [str(SGLANG_PYTHON), "-c", IMPORT_CHECK],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **cpu_env()},
    )
    if probe.returncode != 0:
        raise RuntimeError(f"SGLang does not import in {VENV}: {probe.stderr[-3000:]}")
    version = probe.stdout.strip().splitlines()[-1]
    if version != SGLANG_VERSION:
        raise RuntimeError(f"{VENV} has sglang {version}, not {SGLANG_VERSION}; remove it")
    STAMP.write_text(version + "\n")
    return SGLANG_PYTHON
