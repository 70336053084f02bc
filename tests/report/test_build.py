"""build_report end to end: files written, content consistent, degraded inputs still render."""

from __future__ import annotations

import csv
import json
import re

import pytest
from pydantic import ValidationError

from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.records import TrialRecord
from ddtune.report import ReportOptions, build_report

FILES = ("report.html", "report.md", "results.csv", "results.json")
PLOTS = (
    "forest.png",
    "tps_vs_budget.png",
    "acceptance_vs_budget.png",
    "tps_vs_acceptance.png",
    "pass_rate.png",
)


def test_full_report_writes_every_file(synth, tmp_path):
    records = synth.make_records(synth.standard_effects(), repeats=3)
    summary = build_report(records, tmp_path / "out")
    out = tmp_path / "out"
    for name in FILES + PLOTS:
        assert (out / name).stat().st_size > 0, name
        assert (out / name).read_bytes()[:8] != b"" and name in {
            p.name for p in summary.files.values()
        }
    for name in PLOTS:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_html_is_self_contained(synth, tmp_path):
    build_report(synth.make_records(synth.standard_effects(), repeats=2), tmp_path)
    html = (tmp_path / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == len(PLOTS)
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "<script" not in html and "<link" not in html


def test_markdown_csv_json_tell_the_same_story(synth, tmp_path):
    records = synth.make_records(synth.standard_effects(), repeats=3)
    summary = build_report(records, tmp_path)
    best = summary.recommendation("throughput").label
    markdown = (tmp_path / "report.md").read_text()
    assert f"SEPARATED: {best}" in markdown
    assert "![Throughput vs tree budget](tps_vs_budget.png)" in markdown
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    assert [r["label"] for r in rows] == [c.label for c in summary.configs]
    by_label = {r["label"]: r for r in rows}
    assert float(by_label[best]["short_tps_mean"]) == pytest.approx(
        summary.config(best).mean("short_tps")
    )
    assert by_label[best]["pareto"] == "True"
    assert [by_label[best][k] for k in ("mode", "budget", "topk", "window")] == [
        "ddtree",
        "16",
        "4",
        "none",
    ]
    data = json.loads((tmp_path / "results.json").read_text(), parse_constant=_reject)
    assert len(data["trials"]) == 15
    assert data["report"]["recommendations"][0]["label"] == best
    assert TrialRecord.from_dict(data["trials"][0]) == records[0]
    assert data["trials"][0]["params"] == {"mode": "ar", "budget": 16, "topk": 4, "window": "none"}
    assert data["report"]["configs"][0]["params"]["window"] == "none"
    assert data["report"]["options"]["tolerance"] == 0.03
    rec = data["report"]["recommendations"][0]
    assert (rec["status"], rec["equivalent"], rec["leader"]) == ("separated", [], best)
    assert "paired by pass" in rec["analysis"]
    assert data["report"]["configs"][0]["eliminated_at_pass"] is None


def test_terminal_table_lists_configs_and_recommendations(synth, tmp_path):
    summary = build_report(synth.make_records(synth.standard_effects(), repeats=2), tmp_path)
    table = summary.terminal_table()
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["config", "done", "short"]
    assert sum(1 for line in lines if line.startswith(("ar", "dflash", "ddtree"))) == 5
    assert "highest throughput whose pass rate is not significantly below the best:" in table


def test_failures_and_missing_metrics_still_render(synth, tmp_path):
    records = synth.make_records(synth.standard_effects(), repeats=2)
    log = tmp_path / "logs" / "trial-3.log"
    log.parent.mkdir()
    log.write_text("Traceback ...\nCUDA out of memory\n")
    for r in records:
        r.metrics["long_tps"] = None  # long context never measured
        r.metrics.pop("coding_passed", None)  # no coding workload
        r.metrics.pop("coding_total", None)
    broken = [r for r in records if r.label == "ddtree b32 k4 wnone"]
    for r in broken:
        r.status, r.failure, r.attempts, r.metrics = "failed", "oom", 3, {}
        r.failure_detail, r.log_tail_path = "CUDA out of memory", str(log)
    records.append(
        TrialRecord(
            99,
            "ddtree b64 k8 wnone",
            DecodeParams("ddtree", 64, 8),
            False,
            0,
            "interrupted",
            attempts=1,
            failure="timeout:health",
        )
    )
    summary = build_report(records, tmp_path / "out")
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "| ddtree b32 k4 wnone |" in markdown and "| oom | 3 |" in markdown
    assert "[log tail](../logs/trial-3.log)" in markdown
    assert "timeout:health" in markdown
    assert summary.recommendation("long_context").status == "no data"
    assert "coding pass rate not measured" in " ".join(summary.notes)
    assert "Plot skipped: pass rate: no coding results" in markdown
    assert (tmp_path / "out" / "report.html").stat().st_size > 0


def test_no_baseline_and_single_repeat_render(synth, tmp_path):
    records = synth.make_records(synth.standard_effects()[1:], repeats=1)
    summary = build_report(records, tmp_path)
    markdown = (tmp_path / "report.md").read_text()
    assert summary.baseline is None
    assert "No baseline (AR) config in this sweep" in markdown
    assert "(n=1)" in markdown


def test_unknown_metrics_are_warned_not_dropped_silently(synth, tmp_path):
    records = synth.make_records(synth.standard_effects(), repeats=1)
    records[0].metrics["tpot_s"] = 0.01
    summary = build_report(records, tmp_path, ReportOptions(plots=False))
    assert any("unknown metric(s) tpot_s" in w for w in summary.warnings)
    assert not (tmp_path / "tps_vs_budget.png").exists()


def test_bad_inputs_are_user_errors(synth, tmp_path):
    with pytest.raises(UserError, match="no trial records"):
        build_report([], tmp_path)
    with pytest.raises(UserError, match="TrialRecord"):
        build_report([{"label": "ar"}], tmp_path)
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(UserError, match="not a directory"):
        build_report(synth.make_records(synth.standard_effects(), repeats=1), target)


def test_report_options_are_strict():
    with pytest.raises(ValidationError, match="tolerance"):
        ReportOptions(tolerance=0.9)
    with pytest.raises(UserError, match=r"report\.tolerance: must be greater than 0") as info:
        ReportOptions.from_dict({"tolerance": 0.0})
    assert info.value.key == "report.tolerance"
    with pytest.raises(UserError, match=r"unknown key report\.colour; expected one of") as info:
        ReportOptions.from_dict({"confidence": 0.9, "colour": "red"})
    assert info.value.key == "report.colour"
    assert ReportOptions.from_dict({"confidence": 0.9}).to_dict()["confidence"] == 0.9


def _reject(token: str) -> None:
    raise ValueError(f"results.json is not strict JSON: {token}")


def test_condition_warning_reaches_markdown_and_html(synth, tmp_path):
    records = synth.make_records(synth.standard_effects(), repeats=2)
    for r in records[:3]:
        r.conditions["hardware_fingerprint"] = "hw-laptop"
    summary = build_report(records, tmp_path, ReportOptions(plots=False))
    assert len(summary.warnings) == 1
    assert (
        "Warning: compared trials ran under different hardware fingerprints"
        in (tmp_path / "report.md").read_text()
    )
    html = (tmp_path / "report.html").read_text()
    assert (
        '<ul class="warning"><li>Warning: compared trials ran under different hardware fingerprints'
        in html
    )
    assert "WARNING: compared trials" in summary.terminal_table()


def test_html_escapes_labels(synth, tmp_path):
    records = synth.make_records(synth.standard_effects()[:2], repeats=1)
    records[1].label = "dflash <script>alert(1)</script>"
    build_report(records, tmp_path, ReportOptions(plots=False))
    html = (tmp_path / "report.html").read_text()
    assert "<script>" not in html and "dflash &lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_report_is_written_whole_or_not_at_all(synth, tmp_path, monkeypatch):
    """A report that fails half-way (here: its CSV) leaves the folder as it was; the next
    one replaces the old one's files, removes those it no longer writes, and leaves a
    user's own file in the folder alone."""
    import ddtune.report.build as build

    out = tmp_path / "out"
    records = synth.make_records(synth.standard_effects(), repeats=2)
    build_report(records, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (out / "notes.txt").write_text("mine")
    (out / "old-plot.png").write_bytes(b"stale")  # not the report's: kept
    fewer = records[: len(records) // 2]

    def broken(summary, path):  # noqa: ANN001
        raise RuntimeError("disk full")

    monkeypatch.setattr(build, "write_csv", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        build_report(fewer, out, ReportOptions(plots=False))
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.name in before}
    assert after == before  # every file of the last report as it was, none of the new one
    assert not [p for p in out.iterdir() if p.name.startswith(".ddtune-report.") and p.is_dir()]
    monkeypatch.undo()
    summary = build_report(fewer, out, ReportOptions(plots=False))
    names = {p.name for p in out.iterdir() if not p.name.startswith(".")}
    assert names == set(FILES) | {"notes.txt", "old-plot.png"}  # the plots of the last one gone
    assert {p.name for p in summary.files.values()} == set(FILES)
    assert all(p.parent == out for p in summary.files.values())


def test_csv_has_the_method_columns_of_configs_named_as_methods(synth, tmp_path):
    """AR first (no method), then EAGLE-3 configs named with their knobs: every column any
    row has, blank in the rows without it, the knobs as JSON."""

    def eagle3(steps: int) -> DecodeParams:
        knobs = {"num_steps": steps, "drafter": "/heads/eagle3"}
        return DecodeParams.from_wire({"method": "eagle3", "method_knobs": knobs})

    effects = [
        synth.Effect(DecodeParams("ar"), 100.0, 80.0, 1.0, baseline=True),
        synth.Effect(eagle3(3), 150.0, 120.0, 3.3),
        synth.Effect(eagle3(5), 160.0, 125.0, 4.4),
    ]
    build_report(synth.make_records(effects, repeats=2), tmp_path)
    rows = {r["label"]: r for r in csv.DictReader((tmp_path / "results.csv").open())}
    assert rows["ar"]["method"] == "" and rows["ar"]["method_knobs"] == ""
    five = rows["eagle3 num_steps=5"]
    assert five["method"] == "eagle3"
    assert json.loads(five["method_knobs"]) == {"drafter": "/heads/eagle3", "num_steps": 5}
