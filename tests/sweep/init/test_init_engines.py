"""Slow: the recorded launch commands read with the real engines' own parsers.

Where `.venv-sglang` and `.venv-vllm` are installed (their stamp files), `sweep init`
asks each engine's parser for its option table (the preflight's probe, no model
loaded): every flag of every recorded command is one the real parser knows, and the
fields read through the real table are the ones ddtune's own table reads (model,
drafter, method, knobs, tp, host, port, the arguments kept). The DDTree build's
`--speculative-ddtree-budget` is the one flag released SGLang does not know.
"""

from __future__ import annotations

import dataclasses
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
