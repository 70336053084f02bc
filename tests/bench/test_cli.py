"""`ddtune bench` from the command line: matrix file in, JSON document out, one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ddtune.bench import BenchResult
from ddtune.cli import main

MATRIX = """
[bench]
warmup = 1
[bench.short]
n_prompts = 2
max_tokens = 6
repeats = 1
[bench.long]
enabled = false
[bench.coding]
tasks_file = "fixtures/tasks.jsonl"
limit = 2
"""


def test_bench_writes_json(fake_server_cls, tmp_path: Path, fixtures_dir: Path, capsys) -> None:
    (tmp_path / "fixtures").mkdir()  # tasks_file is relative to the matrix file's folder
    shutil.copy(fixtures_dir / "tasks.jsonl", tmp_path / "fixtures" / "tasks.jsonl")
    spec = tmp_path / "matrix.toml"
    spec.write_text(MATRIX)
    out = tmp_path / "result.json"
    with fake_server_cls(kind="ddtune") as server:
        code = main(
            [
                "bench",
                "--url",
                server.url,
                "--matrix",
                str(spec),
                "--out",
                str(out),
                "--no-progress",
            ]
        )
    assert code == 0
    result = BenchResult.read(out)
    assert result.matrix["short"]["max_tokens"] == 6 and result.aggregates["coding_total"] == 2
    assert len(result.samples) == 4  # 2 short + 2 coding
    summary = json.loads(capsys.readouterr().out)
    assert summary["aggregates"]["acceptance_length"] == pytest.approx(
        3.0
    )  # 6 tokens in rounds of 3
    assert summary["prompt_set_hash"] == result.prompt_set_hash


def test_bad_matrix_is_one_line_error(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "m.toml"
    spec.write_text("[bench]\nconcurency = 2\n")
    assert main(["bench", "--url", "http://127.0.0.1:9", "--matrix", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ddtune: error: unknown key bench.concurency; expected one of")
    assert err.count("\n") == 1


def test_unreachable_server_fails_cleanly(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "m.toml"
    spec.write_text("[bench]\nwarmup = 0\n[bench.coding]\nenabled = false\n")
    assert (
        main(["bench", "--url", "http://127.0.0.1:9", "--matrix", str(spec), "--no-progress"]) == 1
    )
    assert "bench failed" in capsys.readouterr().err
