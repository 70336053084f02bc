"""Results per service slot: the slower-slot flag, passes across slots, and the report section."""

from __future__ import annotations

import random

from ddtune.params import DecodeParams
from ddtune.records import TrialRecord
from ddtune.report import build_report
from ddtune.report.by_slot import slot_report
from ddtune.report.options import ReportOptions

CONFIGS = {"ar": DecodeParams("ar"), "ddtree b8 k2 wnone": DecodeParams("ddtree", 8, 2, None)}
SPEED = {"ar": 100.0, "ddtree b8 k2 wnone": 180.0}


def records(slow: dict[str, float], mixed_pass: int | None = None, fingerprints=None):
    """3 passes per slot s0/s1 (each pass on one slot), both configs in every pass."""
    rng = random.Random(7)
    out, trial_id = [], 0
    for slot_index, slot in enumerate(("s0", "s1")):
        for p in range(3):
            repeat = 1 + slot_index * 3 + p
            for label, params in CONFIGS.items():
                trial_id += 1
                on = "s0" if repeat == mixed_pass and label == "ar" else slot
                tps = SPEED[label] * slow.get(on, 1.0) * (1 + rng.uniform(-0.01, 0.01))
                conditions = {
                    "slot": on,
                    "node": "10.0.0.1" if on == "s0" else "10.0.0.2",
                    "hardware_fingerprint": (fingerprints or {}).get(on, "hw-same"),
                }
                out.append(
                    TrialRecord(
                        trial_id,
                        label,
                        params,
                        label == "ar",
                        repeat,
                        "done",
                        metrics={"short_tps": tps, "long_tps": tps},
                        conditions=conditions,
                    )
                )
    return out


def test_a_systematically_slower_slot_is_flagged():
    report = slot_report(records({"s1": 0.9}), 0.95, 0.02)
    s0, s1 = report.slots
    assert (s0.slot, s0.trials, s0.slower) == ("s0", 6, False)
    assert (s1.slot, s1.trials, s1.slower) == ("s1", 6, True)
    assert s1.relative.high < 0 < s0.relative.low
    assert s1.percent().startswith("-5.") and s0.nodes == ["10.0.0.1"]
    assert report.warnings == [
        f"slot s1 is systematically slower: its trials ran at {s1.percent()} of their "
        "configurations' mean throughput; rerun its trials elsewhere or check that slot"
    ]
    assert report.mixed_passes == {} and report.notes == []


def test_equal_slots_are_not_flagged():
    report = slot_report(records({}), 0.95, 0.02)
    assert not any(s.slower for s in report.slots) and report.warnings == []


def test_a_pass_across_slots_is_stated_and_warned_when_hardware_differs():
    same = slot_report(records({}, mixed_pass=5), 0.95, 0.02)
    assert same.mixed_passes == {5: ["s0", "s1"]}
    assert same.notes == ["pass 5 compares configurations across slots s0, s1"]
    assert same.warnings == []
    differ = slot_report(records({}, 5, {"s0": "hw-a", "s1": "hw-b"}), 0.95, 0.02)
    assert any("pass 5 compares across slots with different hardware" in w for w in differ.warnings)


def test_local_records_have_no_slot_report():
    plain = [TrialRecord(1, "ar", DecodeParams("ar"), True, 1, "done", metrics={"short_tps": 1.0})]
    assert slot_report(plain, 0.95, 0.02) is None


def test_the_report_has_a_slots_section(tmp_path):
    summary = build_report(records({"s1": 0.9}), tmp_path, ReportOptions(plots=False))
    text = (tmp_path / "report.md").read_text()
    assert "## Slots" in text and "systematically slower" in text
    assert summary.slots is not None and summary.slots.slots[1].slower
    assert any(w.startswith("slot s1 is systematically slower") for w in summary.warnings)
    assert '"slots"' in (tmp_path / "results.json").read_text()
