"""The CLI: `ddtune bench-engine` (single-stream and `--concurrency`) on random checkpoints."""

from __future__ import annotations

import json

from ddtune.cli import main


def test_bench_engine_bad_flags_are_user_errors(capsys):
    for flags in (
        ["--topk", "0"],
        ["--budgets", "4,x"],
        ["--max-tokens", "0"],
        ["--window", "-2"],
        ["--concurrency", "0,2"],
        ["--concurrency", "two"],
        ["--concurrency", "2", "--budgets", "64", "--max-step-tokens", "32"],
    ):
        assert main(["bench-engine", "--random", *flags]) == 2
        assert "error" in capsys.readouterr().err


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
    assert "RANDOM" in printed and "ddtree b4 k4 wnone" in printed
    rows = json.loads(out.read_text())
    labels = ["ar", "dflash wnone", "ddtree b0 k4 wnone", "ddtree b4 k4 wnone"]
    assert [r["label"] for r in rows] == labels
    assert [(r["mode"], r["budget"], r["topk"], r["window"]) for r in rows] == [
        ("ar", 0, 1, "none"),
        ("dflash", 0, 1, "none"),
        ("ddtree", 0, 4, "none"),
        ("ddtree", 4, 4, "none"),
    ]
    assert all(r["lossless"] for r in rows) and all(r["tokens"] == 24 for r in rows)


def test_bench_engine_concurrency_prints_the_summary_and_json(tmp_path, capsys):
    out = tmp_path / "rows.json"
    args = ["bench-engine", "--random", "--concurrency", "2,1", "--budgets", "4"]
    args += ["--max-tokens", "5", "--threads", "1", "--json", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "AR vs the best speculative config" in printed and "crossover:" in printed
    assert "tree build + mask + commit at ddtree b4 k4 wnone, concurrency 2" in printed
    rows = json.loads(out.read_text())
    labels = ["ar", "dflash wnone", "ddtree b4 k4 wnone"]
    assert [(r["concurrency"], r["label"]) for r in rows] == [
        (c, x) for c in (1, 2) for x in labels
    ]
    assert all(r["lossless"] for r in rows)
    assert all(r["tokens"] == 4 * 5 for r in rows)  # 2 x the largest concurrency prompts
    assert all(
        r["tokens_per_cpu_second"] > 0 and 1 <= r["mean_batch"] <= r["concurrency"] for r in rows
    )
