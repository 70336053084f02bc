"""The CLI: `ddtune generate --json` and `ddtune bench-engine` on random checkpoints."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ddtune.cli import main
from ddtune.engine.testing import write_random_checkpoint


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    return write_random_checkpoint(tmp_path_factory.mktemp("cli"), seed=5)


def test_generate_json_matches_ar_and_reports_stats(model_dirs, capsys):
    target, drafter = model_dirs
    base = [
        "generate",
        "--target",
        str(target),
        "--drafter",
        str(drafter),
        "--threads",
        "1",
        "--prompt",
        "def f(x):",
        "--max-tokens",
        "12",
        "--ignore-eos",
        "--json",
    ]
    assert main([*base, "--mode", "ar"]) == 0
    ar = json.loads(capsys.readouterr().out)
    assert main([*base, "--mode", "ddtree", "--budget", "8", "--topk", "2", "--window", "4"]) == 0
    tree = json.loads(capsys.readouterr().out)
    assert tree["token_ids"] == ar["token_ids"] and len(ar["token_ids"]) == 12
    assert isinstance(tree["text"], str)
    assert tree["stats"]["mean_acceptance_length"] >= 1.0
    assert set(tree["stats"]["stage_seconds"]) == {"draft", "tree", "verify", "commit"}


def test_generate_errors_are_one_line(model_dirs, tmp_path):
    target, drafter = model_dirs
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ddtune.cli",
            "generate",
            "--target",
            str(tmp_path / "nope"),
            "--drafter",
            str(drafter),
            "--prompt",
            "x",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "does not exist" in proc.stderr


def test_bench_engine_random_prints_table_and_json(tmp_path, capsys):
    out = tmp_path / "rows.json"
    args = [
        "bench-engine",
        "--random",
        "--budgets",
        "0,4",
        "--max-tokens",
        "6",
        "--threads",
        "1",
        "--json",
        str(out),
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "RANDOM" in printed and "ddtree b4 k4" in printed
    rows = json.loads(out.read_text())
    assert [r["label"] for r in rows] == ["ar", "dflash", "ddtree b0 k4", "ddtree b4 k4"]
    assert all(r["lossless"] for r in rows) and all(r["tokens"] == 24 for r in rows)
