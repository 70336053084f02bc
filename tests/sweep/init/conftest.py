"""The recorded launch commands of fixtures/ as a machine would hold them.

`installed(name)` writes a fixture unit with its placeholders filled in:
@PYTHON@ an interpreter that runs the FAKE engines (tests/engines/fixtures/fake_sglang,
fake_vllm; on PYTHONPATH), @BIN@ the folder of that interpreter (`vllm serve`'s
entry point sits beside it), @MODELS@ model folders with a config.json (the drafters
with block_size 16, the targets with their context).
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
FAKES = Path(__file__).parents[2] / "engines" / "fixtures"
UNITS = sorted(p.name for p in FIXTURES.glob("*.service"))
MODELS = {
    "Kimi-K2-Instruct": {"max_position_embeddings": 131072},
    "Kimi-K2-DFlash": {"block_size": 16},
    "Qwen3-235B": {"max_position_embeddings": 40960},
    "Qwen3-235B-DFlash": {"block_size": 16},
    "Llama-3.3-70B": {"max_position_embeddings": 131072},
    "Llama-3.3-70B-EAGLE3": {},
}


@dataclass(frozen=True)
class Installed:
    root: Path
    bin: Path
    models: Path

    def unit_text(self, name: str) -> str:
        text = (FIXTURES / name).read_text()
        return (
            text.replace("@PYTHON@", str(self.bin / "python"))
            .replace("@BIN@", str(self.bin))
            .replace("@MODELS@", str(self.models))
        )

    def unit_file(self, name: str) -> Path:
        path = self.root / "units" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.unit_text(name))
        return path

    def argv(self, name: str) -> list[str]:
        """The unit's ExecStart as words (continuations joined, the `-` prefix dropped)."""
        lines = self.unit_text(name).split("ExecStart=", 1)[1].splitlines()
        joined = ""
        for line in lines:
            joined += line.rstrip("\\").strip() + " "
            if not line.endswith("\\"):
                break
        return shlex.split(joined.lstrip("-"))


@pytest.fixture
def installed(tmp_path, monkeypatch) -> Installed:
    import json

    bin_dir, models = tmp_path / "bin", tmp_path / "models"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    (bin_dir / "vllm").write_text("#!/bin/sh\nexit 0\n")
    for name, config in MODELS.items():
        (models / name).mkdir(parents=True)
        (models / name / "config.json").write_text(json.dumps(config))
    path = os.pathsep.join([str(FAKES / "fake_sglang"), str(FAKES / "fake_vllm")])
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv("FAKE_SGLANG_DDTREE", "1")  # the DDTree pull request's build
    monkeypatch.chdir(tmp_path)
    return Installed(tmp_path, bin_dir, models)
