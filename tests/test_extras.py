"""A core install (no `ddtune[engine]`): the apparatus runs, the engine's commands say what to install.

The fast tests run the real `ddtune` command in a subprocess whose imports of
torch, transformers, safetensors and tokenizers fail (tests/fixtures/no_engine,
a meta-path finder on PYTHONPATH); the slow one builds a real venv with
`pip install .` (no extras) and checks that torch is not in it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from ddtune.extras import engine_hint, missing_engine_module, require_engine

ROOT = Path(__file__).resolve().parents[1]
BLOCKER = Path(__file__).resolve().parent / "fixtures" / "no_engine"
HINT = "pip install 'ddtune[engine]'"


def ddtune_without_engine(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(BLOCKER), str(ROOT / "src")]))
    code = "import sys; from ddtune.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def remote_spec(tmp_path: Path) -> Path:
    """The systemd SGLang example (a service ddtune does not run itself), argument check off."""
    text = (ROOT / "examples" / "sglang-ddtree-systemd.toml").read_text()
    spec = tmp_path / "remote.toml"
    spec.write_text(text.replace("[service]\n", "[service]\nengine_check = false\n", 1))
    return spec


def test_the_blocker_blocks() -> None:
    result = ddtune_without_engine("--help")
    probe = subprocess.run(
        [sys.executable, "-c", "import torch"],
        env=dict(os.environ, PYTHONPATH=str(BLOCKER)),
        capture_output=True,
        text=True,
    )
    assert probe.returncode == 1 and "No module named 'torch'" in probe.stderr
    assert result.returncode == 0, result.stderr
    assert "sweep" in result.stdout and "trace" in result.stdout


def test_sweep_plan_runs_without_the_engine(tmp_path: Path) -> None:
    result = ddtune_without_engine(
        "sweep", "plan", str(remote_spec(tmp_path)), "--store", str(tmp_path / "s.db")
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "planned now" in result.stdout


def test_a_trace_plan_runs_without_the_engine(tmp_path: Path) -> None:
    """`trace record --plan-only` loads nothing: the core install prints the plan (memory,
    time) and exits 0; recording itself then names the extra."""
    args = ["trace", "record", "--prompt", "def f(x):", "--out", str(tmp_path / "t")]
    planned = ddtune_without_engine(*args, "--plan-only", cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout.startswith("plan: target") and "per 1,000 traced tokens" in planned.stdout
    assert planned.stderr == "" and not (tmp_path / "t").exists()
    recorded = ddtune_without_engine(*args, cwd=tmp_path)
    assert recorded.returncode == 2 and HINT in recorded.stderr
    assert recorded.stdout.startswith("plan: target")  # the plan first, then the refusal


@pytest.mark.parametrize(
    "command",
    [
        ["generate", "--prompt", "hi"],
        ["serve", "--port", "0"],
        ["trace", "record", "--prompt", "x", "--out", "OUT"],
        ["demo", "--out", "OUT"],
    ],
)
def test_engine_commands_name_the_extra(tmp_path: Path, command: list[str]) -> None:
    command = [str(tmp_path / "trace") if part == "OUT" else part for part in command]
    result = ddtune_without_engine(*command, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == [f"ddtune: error: {engine_hint('torch')}"], result.stderr
    assert HINT in lines[0]


def test_missing_engine_module_tells_engine_from_other_modules() -> None:
    assert missing_engine_module(ModuleNotFoundError("x", name="torch.nn")) == "torch"
    assert missing_engine_module(ModuleNotFoundError("x", name="safetensors")) == "safetensors"
    assert missing_engine_module(ModuleNotFoundError("x", name="optuna")) is None
    assert "transformers" in engine_hint("transformers")


def test_require_engine_passes_with_the_extra_installed() -> None:
    require_engine()  # this venv installs .[engine,test]


@pytest.mark.slow
def test_a_real_core_install_has_no_torch(tmp_path: Path) -> None:
    """`pip install .` (no extras) into a fresh venv: no torch, and the CLI plans a sweep."""
    env_dir = tmp_path / "core"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(ROOT)], check=True, timeout=1200)
    installed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.lower()
    for name in ("torch", "transformers", "safetensors", "tokenizers"):
        assert f"\n{name}==" not in f"\n{installed}", installed
    ddtune = env_dir / "bin" / "ddtune"
    helped = subprocess.run([str(ddtune), "--help"], capture_output=True, text=True)
    assert helped.returncode == 0, helped.stderr
    planned = subprocess.run(
        [
            str(ddtune),
            "sweep",
            "plan",
            str(remote_spec(tmp_path)),
            "--store",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert planned.returncode == 0, planned.stderr
    generated = subprocess.run(
        [str(ddtune), "generate", "--prompt", "hi"], capture_output=True, text=True, cwd=tmp_path
    )
    assert generated.returncode == 2 and HINT in generated.stderr
