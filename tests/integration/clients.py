"""Helpers for the real-client tests: the clients' venv and their runs.

The clients (guidellm, aiperf, lm-eval, schemathesis) live in their own venv,
never in ddtune's: `DDTUNE_CLIENTS_VENV` names an existing one; otherwise
`clients_python()` creates `<cache>/ddtune/clients-venv` (`XDG_CACHE_HOME`,
default `~/.cache`) once, pip-installing the pinned versions below, and later
calls only check that they import. The clients run unmodified as subprocesses
against a `ddtune serve --port 0` bound to 127.0.0.1 (the `common.serving` fixture helper).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUNDLED_TARGET = REPO / "src" / "ddtune" / "assets" / "models" / "target"
PINS = (
    "guidellm==0.8.1",
    "aiperf==0.13.0",
    "lm-eval[api]==0.4.13",
    "schemathesis==4.32.5",
)
IMPORTS = "import guidellm, aiperf, lm_eval, tenacity, schemathesis"
# Quiet, offline-friendly clients: no telemetry, no update checks.
CLIENT_ENV = {"HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1", "HF_DATASETS_OFFLINE": "1"}


def clients_python() -> Path:
    """The clients' interpreter, creating their venv on first use (minutes)."""
    given = os.environ.get("DDTUNE_CLIENTS_VENV")
    venv = Path(given) if given else _cache_dir() / "clients-venv"
    python = venv / "bin" / "python"
    stamp = venv / ".ddtune-clients-ok"
    if not given and not stamp.exists():
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PINS], check=True, timeout=3600)
    probe = subprocess.run(
        [str(python), "-c", IMPORTS], capture_output=True, text=True, timeout=600
    )
    if probe.returncode != 0:
        raise RuntimeError(f"the clients do not import in {venv}: {probe.stderr[-2000:]}")
    if not given:
        stamp.write_text("ok\n")
    return python


def client_bin(name: str) -> str:
    """A client's console script in the clients' venv."""
    return str(clients_python().parent / name)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ddtune"


def run_client(
    argv: list[str], cwd: Path, timeout: float = 900.0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one client command; its output is kept for the assertion message."""
    full_env = {**os.environ, **CLIENT_ENV, **(env or {})}
    full_env.pop("PYTHONPATH", None)  # the clients' venv, not ddtune's sources
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env
    )
