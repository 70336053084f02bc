"""Losslessness at T=0 (with bench's real compare_outputs) and divergence-vs-noise notes."""

from __future__ import annotations

from ddtune.params import DecodeParams
from ddtune.report import ReportOptions, analyze
from ddtune.report.lossless import LosslessCheck, correctness_note, load_compare

TREE = "ddtree b16 k4 wnone"


def _effects(synth, tree_outputs=None, tree_passed=10):
    outputs = list(synth.OUTPUTS) if tree_outputs is None else tree_outputs
    return [
        synth.Effect(DecodeParams("ar"), 100.0, 80.0, 1.0, baseline=True),
        synth.Effect(
            DecodeParams("ddtree", 16, 4), 190.0, 150.0, 4.5, outputs=outputs, passed=tree_passed
        ),
    ]


def test_bench_compare_outputs_is_used():
    assert load_compare() is not None


def test_identical_outputs_are_reported_identical(synth):
    summary = analyze(synth.make_records(_effects(synth), repeats=2), ReportOptions())
    assert summary.lossless["ar"].status == "reference"
    assert summary.lossless[TREE].status == "identical"
    assert summary.lossless[TREE].repeats_checked == 2


def test_divergence_names_request_and_char(synth):
    outputs = list(synth.OUTPUTS)
    outputs[1] = outputs[1][:4] + "X" + outputs[1][5:]
    summary = analyze(synth.make_records(_effects(synth, outputs, tree_passed=7)), ReportOptions())
    check = summary.lossless[TREE]
    assert (check.status, check.request, check.char) == ("diverged", 1, 4)
    assert "diverged at request 1, char 4" in check.text
    note = summary.correctness_notes[TREE]
    assert note.startswith("divergence:") and "not a trade-off" in note


def test_same_outputs_different_verdicts_is_noise(synth):
    summary = analyze(synth.make_records(_effects(synth, tree_passed=9)), ReportOptions())
    assert summary.lossless[TREE].status == "identical"
    assert summary.correctness_notes[TREE].startswith("noise: identical T=0 outputs")


def test_temperature_above_zero_is_not_checked(synth):
    records = synth.make_records(_effects(synth, tree_passed=9))
    for r in records:
        r.temperature = 0.7
    summary = analyze(records, ReportOptions())
    assert summary.lossless[TREE].status == "not checked"
    assert "T > 0" in summary.lossless[TREE].text
    assert summary.correctness_notes[TREE].startswith("noise: not significant (Fisher p = ")


def test_no_baseline_or_no_outputs_is_not_checked(synth):
    effects = _effects(synth)[1:]
    summary = analyze(synth.make_records(effects), ReportOptions())
    assert summary.lossless[TREE].text == "not checked: no baseline outputs at T = 0"
    records = synth.make_records(_effects(synth))
    for r in records:
        if r.label == TREE:
            r.outputs = []
    assert (
        analyze(records, ReportOptions()).lossless[TREE].text == "not checked: no outputs recorded"
    )


def test_significant_difference_without_outputs_points_at_divergence():
    note = correctness_note(LosslessCheck("not checked", "n/a"), None, fisher_p=0.001, alpha=0.05)
    assert "points at divergence" in note and "not at a trade-off" in note
