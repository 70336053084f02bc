"""The live report of a run (`sweep/reporting.py` `LiveReport`): a rewrite that fails is said
in red and in the run's summary line, and the folder then holds a notice, not the last
report's answer beside newer trials (issue 44, item 7)."""

from __future__ import annotations

import io
import json

from rich.console import Console

import ddtune.sweep.reporting as reporting
from ddtune.report.render.atomic import MANIFEST
from ddtune.sweep.plan.strategies import read_spec
from ddtune.sweep.reporting import LiveReport
from ddtune.sweep.run.loop import run_sweep
from ddtune.sweep.store.db import Store

CONFIGS = """
    [[configs]]
    mode = "ddtree"
    budget = 4
    topk = 2
"""


def test_a_live_report_that_cannot_be_written_leaves_a_notice_not_a_stale_answer(
    tmp_path, fake_spec_writer, port, monkeypatch
):
    spec = fake_spec_writer(tmp_path, "live-fail", CONFIGS, port, sweep="repeats = 2")
    store_path = tmp_path / "runs" / "store.sqlite"
    said = io.StringIO()
    live = LiveReport(store_path.parent / "report", "live-fail", Console(file=said, width=300))
    live.MAX_SHARE = 1.0  # every pass
    run_sweep(read_spec(spec), store_path, Console(file=io.StringIO()), on_pass=live)
    folder = store_path.parent / "report"
    assert json.loads((folder / "results.json").read_text())["trials"]
    assert "FAILED" not in live.summary_line()

    def broken(*args, **kwargs):  # noqa: ANN002, ANN003
        raise ValueError("dict contains fields not in fieldnames: 'method_knobs', 'method'")

    monkeypatch.setattr(reporting, "build_stored_report", broken)
    store = Store(store_path, create=False)
    try:
        live.dirty = True
        live(store, live.prepared)
    finally:
        store.close()
    assert "live report not rewritten: ValueError: dict contains fields" in said.getvalue()
    assert live.summary_line().startswith("live report: FAILED 1 time(s), last: ValueError")
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == [
        "report.html",
        "report.md",
    ]
    notice = (folder / "report.md").read_text()
    assert notice.startswith("# No current report") and "method_knobs" in notice
    assert json.loads((folder / MANIFEST).read_text()) == ["report.html", "report.md"]
