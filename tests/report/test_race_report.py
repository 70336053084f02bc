"""The report of a race (history per config, stop reason) and of reused starts (variance)."""

from __future__ import annotations

import json
import math

from ddtune.params import DecodeParams
from ddtune.records import Elimination, SweepContext, TrialRecord
from ddtune.report import ReportOptions, build_report

FAST, SLOW = DecodeParams("ddtree", 16, 4), DecodeParams("ddtree", 4, 2)


def _records(passes_per_start: int = 1) -> list[TrialRecord]:
    """FAST 10% ahead of SLOW in every pass; each pass shifts both (drift); starts named."""
    records, trial_id = [], 0
    for repeat in range(1, 7):
        drift = 1 + 0.05 * math.sin(repeat)
        for params, rate in ((FAST, 110.0), (SLOW, 100.0)):
            trial_id += 1
            start = f"{params.label()}-{(repeat - 1) // passes_per_start}"
            noise = 1 + 0.01 * ((trial_id * 7) % 5 - 2)
            value = rate * drift * noise
            records.append(
                TrialRecord(
                    trial_id,
                    params.label(),
                    params,
                    False,
                    repeat,
                    "done",
                    metrics={"short_tps": value, "long_tps": value},
                    conditions={"server_identity": {"instance_id": start}},
                )
            )
    return records


def test_race_history_is_in_the_document_and_results_json(tmp_path):
    context = SweepContext(
        "race",
        "throughput",
        race=True,
        passes=6,
        stop="one_left",
        exits=[
            Elimination(
                SLOW.label(), 3, "worse", "ddtree b16 k4 wnone / ddtree b4 k2 wnone = 1.100"
            )
        ],
    )
    summary = build_report(_records(), tmp_path, ReportOptions(plots=False), context)
    markdown = (tmp_path / "report.md").read_text()
    assert "## Race" in markdown and "stopped: one contender left" in markdown
    assert "| ddtree b4 k2 wnone | 3 | worse |" in markdown
    data = json.loads((tmp_path / "results.json").read_text())
    by_label = {c["label"]: c for c in data["report"]["configs"]}
    assert by_label[SLOW.label()]["eliminated_at_pass"] == 3
    assert by_label[SLOW.label()]["elimination_reason"] == "worse"
    assert by_label[FAST.label()]["eliminated_at_pass"] is None
    rec = summary.recommendation("throughput")
    assert (rec.status, rec.label) == ("separated", FAST.label())


def test_variance_components_with_passes_per_start(tmp_path):
    options = ReportOptions(plots=False, passes_per_start=2)
    summary = build_report(_records(passes_per_start=2), tmp_path, options)
    assert set(summary.variance) == {FAST.label(), SLOW.label()}
    vc = summary.variance[FAST.label()]
    assert vc.groups == 3 and vc.observations == 6
    markdown = (tmp_path / "report.md").read_text()
    assert "## Variance components" in markdown and "between starts" in markdown
    blocks = summary.config(FAST.label()).by_pass["throughput_tps"]
    assert sorted(blocks) == [1, 2, 3]  # two passes per block, one value each
    assert "paired by pass over up to 3 passes" in summary.recommendation("throughput").analysis


def test_the_sweeps_objective_comes_first(tmp_path):
    context = SweepContext("grid", "long_context")
    summary = build_report(_records(), tmp_path, ReportOptions(plots=False), context)
    assert [r.objective for r in summary.recommendations][0] == "long_context"
