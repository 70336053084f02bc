"""Slow: the recorded launch commands read with the real engines' own parsers.

Where `.venv-sglang` and `.venv-vllm` are installed (their stamp files), `sweep init`
asks each engine's parser for its option table (the engine check's probe, no model
loaded): every flag of every recorded command is one the real parser knows, and the
fields read through the real table are the ones ddtune's own table reads (model,
drafter, method, knobs, tp, host, port, the arguments kept). The DDTree build's
`--speculative-ddtree-budget` is the one flag released SGLang does not know.

Then the whole path with the real engine where a CPU can check it (SGLang DFLASH as a
GPU dry run, `--device cuda`; vLLM's n-gram `vllm serve`): `sweep init` on the recorded
command, `sweep plan` exit 0 with the engine accepting every config's launch command.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ddtune.sweep.init.parse import engine_options, find_engine, parse_launch

from .conftest import UNITS, Installed

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
REPO = Path(__file__).parents[3]
VENVS = {"sglang": REPO / ".venv-sglang", "vllm": REPO / ".venv-vllm"}
DDTREE_ONLY = {"--speculative-ddtree-budget"}  # the DDTree pull request, unmerged


def venv(engine: str) -> Path:
    path = VENVS[engine]
    if not (path / f".ddtune-{engine}-ok").is_file():
        pytest.skip(f"{path} is not installed (no .ddtune-{engine}-ok stamp)")
    return path


@pytest.mark.parametrize("unit", UNITS)
def test_the_real_parser_reads_each_recorded_command_as_ddtunes_table(unit, tmp_path):
    engine = unit.split("-", 1)[0]
    bin_dir = venv(engine) / "bin"
    installed = Installed(tmp_path, bin_dir, tmp_path / "models")
    found = find_engine(tuple(installed.argv(unit)))
    options = engine_options(found, {})
    assert options, f"{engine}'s parser gave no option table"
    flags = {a.split("=", 1)[0] for a in found.args if a.startswith("-")}
    unknown = flags - set(options) - DDTREE_ONLY
    assert not unknown, f"the recorded command uses flags {engine} does not know: {unknown}"
    real = parse_launch(found, options)
    recorded = parse_launch(found, None)
    assert real.parser == "the engine's own parser"
    different = {
        f.name
        for f in dataclasses.fields(real)
        if f.name != "parser" and getattr(real, f.name) != getattr(recorded, f.name)
    }
    assert not different, f"the real parser reads {different} differently"


REAL_PLANS = {
    # unit: (the bundled models under the fixture's folder names, the engine's environment)
    "sglang-dflash.service": (
        {"Qwen3-235B": "target", "Qwen3-235B-DFlash": "drafter"},
        {  # SGLang on a CPU: tests/integration/sglang_setup.py cpu_env()
            "SGLANG_USE_CPU_ENGINE": "1",
            "PYTHONPATH": str(REPO / "tests" / "integration" / "sglang_cpu_workarounds"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        },
    ),
    "vllm-ngram.service": (
        {"Llama-3.3-70B": "target"},
        {  # the recorded --max-model-len 32768 is past the bundled model's 512
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "HF_HUB_OFFLINE": "1",
        },
    ),
}


@pytest.mark.parametrize("unit", sorted(REAL_PLANS))
def test_the_real_engine_accepts_every_launch_command_of_the_written_spec(
    unit, tmp_path, monkeypatch, capsys
):
    """`sweep init` then `sweep plan` with the real engine: its parser reads the recorded
    command (bundled models under the recorded names) and accepts every config's command."""
    from ddtune.cli import main

    engine = unit.split("-", 1)[0]
    bin_dir = venv(engine) / "bin"
    folders, env = REAL_PLANS[unit]
    models = tmp_path / "models"
    models.mkdir()
    for name, bundled in folders.items():
        (models / name).symlink_to(REPO / "src" / "ddtune" / "assets" / "models" / bundled)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    argv = Installed(tmp_path, bin_dir, models).argv(unit)
    if "--speculative-num-draft-tokens" in argv:  # the recorded 16 is past the bundled block 8,
        at = argv.index("--speculative-num-draft-tokens") + 1  # which the plan refuses
        argv[at] = str(
            json.loads((models / "Qwen3-235B-DFlash" / "config.json").read_text())["block_size"]
        )
    spec = tmp_path / "spec.toml"
    assert main(["sweep", "init", "--out", str(spec), "--from-command", "--", *argv]) == 0
    assert "its flags were read with the engine's own parser" in spec.read_text()
    capsys.readouterr()
    code = main(["sweep", "plan", str(spec)])
    captured = capsys.readouterr()
    printed = captured.out
    assert code == 0, captured.err
    print(printed.splitlines()[-1])
    assert "accepted all" in printed
