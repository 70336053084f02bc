"""T=0 divergences classified by the logit gap there: near-tie, divergence, unclassified."""

from __future__ import annotations

import json

import pytest

from ddtune.params import DecodeParams
from ddtune.report import ReportOptions, analyze
from ddtune.report.lossless.near_tie import classify_divergence, token_gap
from ddtune.report.tables import csv_row

TREE = "ddtree b16 k4 wnone"


def _entry(gap_at_4: float, agree: int = 100) -> dict:
    return {"offsets": [0, 2, 4, 6], "gaps": [3.0, 2.0, gap_at_4, 1.5], "agree": agree}


def _diverged_records(synth, base_gap: float | None, tree_gap: float | None):
    outputs = list(synth.OUTPUTS)
    outputs[1] = outputs[1][:5] + "X" + outputs[1][6:]  # parts at request 1, char 5
    effects = [
        synth.Effect(DecodeParams("ar"), 100.0, 80.0, 1.0, baseline=True),
        synth.Effect(DecodeParams("ddtree", 16, 4), 190.0, 150.0, 4.5, outputs=outputs, passed=7),
    ]
    records = synth.make_records(effects, repeats=1)
    for record in records:
        gap = base_gap if record.is_baseline else tree_gap
        record.logprob_gaps = None if gap is None else [None, _entry(gap), None]
    return records


def test_small_gap_is_a_near_tie_with_the_threshold_stated(synth):
    summary = analyze(_diverged_records(synth, 0.5, 0.03), ReportOptions())
    check = summary.lossless[TREE]
    assert (check.status, check.divergence_class, check.gap) == ("diverged", "near-tie", 0.03)
    assert "near-tie (top-1/top-2 gap 0.0300 nats < 0.1)" in check.text
    assert summary.correctness_notes[TREE].startswith("near-tie divergence:")
    row = csv_row(summary, next(s for s in summary.configs if s.label == TREE))
    assert (row["divergence_class"], row["divergence_gap"]) == ("near-tie", 0.03)
    assert json.dumps(summary.to_dict()["lossless"][TREE]["divergence_class"]) == '"near-tie"'


def test_large_gap_in_both_runs_is_a_divergence(synth):
    summary = analyze(_diverged_records(synth, 0.8, 1.2), ReportOptions(near_tie_gap=0.5))
    check = summary.lossless[TREE]
    assert (check.divergence_class, check.gap) == ("divergence", 0.8)
    assert "nats >= 0.5: a bug or a lossy mode" in check.text
    assert summary.correctness_notes[TREE].startswith("divergence:")


def test_without_gap_data_it_is_unclassified(synth):
    summary = analyze(_diverged_records(synth, 0.01, None), ReportOptions())
    check = summary.lossless[TREE]
    assert (check.divergence_class, check.gap) == ("unclassified", None)
    assert "unclassified: no logit gaps recorded" in check.text


def test_identical_outputs_carry_no_class(synth):
    records = _diverged_records(synth, 0.01, 0.01)
    tree = [r for r in records if not r.is_baseline]
    base = next(r for r in records if r.is_baseline)
    for r in tree:
        r.outputs = list(base.outputs)
    check = analyze(records, ReportOptions()).lossless[TREE]
    assert (check.status, check.divergence_class, check.gap) == ("identical", None, None)


def test_token_gap_picks_the_token_covering_the_char():
    entries = [_entry(0.25)]
    assert token_gap(entries, 0, 5) == 0.25  # token at offset 4 covers chars 4..5
    assert token_gap(entries, 0, 4) == 0.25
    assert token_gap(entries, 0, 3) == 2.0
    assert token_gap(entries, 1, 3) is None  # no entry for that request
    assert token_gap([_entry(0.25, agree=3)], 0, 5) is None  # gap run parted before the token


def test_classification_uses_the_smaller_gap_and_the_threshold_edge():
    assert classify_divergence([_entry(0.1)], [_entry(0.3)], 0, 4, 0.1).kind == "divergence"
    found = classify_divergence([_entry(0.3)], [_entry(0.0)], 0, 4, 0.1)
    assert (found.kind, found.gap) == ("near-tie", 0.0)
    missing = classify_divergence([_entry(0.3, agree=0)], [_entry(0.2, agree=0)], 0, 4, 0.1)
    assert missing.kind == "unclassified" and "no logit gap at the divergence" in missing.text


def test_near_tie_gap_option_is_validated():
    from ddtune.errors import UserError

    with pytest.raises(UserError) as info:
        ReportOptions.from_dict({"near_tie_gap": -1})
    assert info.value.key == "report.near_tie_gap"


def test_report_states_the_threshold_and_the_class(synth, tmp_path):
    from ddtune.report import build_report

    records = _diverged_records(synth, 0.5, 0.03)
    build_report(records, tmp_path, ReportOptions(plots=False, near_tie_gap=0.05))
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "near-tie below 0.05 nats" in text
    assert "near-tie (top-1/top-2 gap 0.0300 nats < 0.05)" in text
    data = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert data["report"]["lossless"][TREE]["gap"] == 0.03
