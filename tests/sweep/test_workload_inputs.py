"""Bad workload input stops `ddtune sweep run` and `sweep plan` before anything starts:
one line, exit 2, no store written, no server started."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ddtune.bench.suites import names, sources
from ddtune.cli import main

SPEC = """
[sweep]
name = "bad-input"
repeats = 1
baseline = {{ mode = "ar" }}

[service]
control = "process"
engine = "ddtune"
command = ["{{python}}", "-m", "ddtune.cli", "serve", "--port", "{{port}}", "--mode", "{{mode}}"]
port = 18799

[bench]
{bench}
"""


def run(tmp_path: Path, bench: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(bench=bench))
    code = main(["sweep", "run", str(spec), "--store", str(tmp_path / "store.sqlite")])
    last = capsys.readouterr().err.strip().splitlines()[-1]  # the error is one line
    assert last.startswith("ddtune: error: ")
    return code, last


def test_a_malformed_traffic_line_stops_the_run(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    (tmp_path / "traffic.jsonl").write_text('{"prompt": "ok"}\n{"prompt": "x", "n": 3}\n')
    code, err = run(tmp_path, f'traffic_file = "{tmp_path / "traffic.jsonl"}"', capsys)
    assert code == 2 and "traffic.jsonl:2:" in err
    assert "1 valid request(s) before it" in err
    assert not (tmp_path / "store.sqlite").exists()


def test_an_unknown_suite_stops_the_run(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    code, err = run(tmp_path, 'suite = ["humaneval", "mmlu"]', capsys)
    assert code == 2 and "bench.suite.1" in err and "'mt-bench'" in err and "mmlu" in err
    assert not (tmp_path / "store.sqlite").exists()


def test_a_suite_whose_package_is_missing_stops_the_run(
    tmp_path: Path, capsys, monkeypatch
) -> None:  # noqa: ANN001
    missing = dataclasses.replace(names.SOURCES["humaneval"], package="no-such-package-ddtune")
    monkeypatch.setitem(sources.SOURCES, "humaneval", missing)
    code, err = run(tmp_path, 'suite = "humaneval"', capsys)
    assert code == 2 and "pip install 'ddtune[suites]'" in err
    assert not (tmp_path / "store.sqlite").exists()
