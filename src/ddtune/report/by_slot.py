"""Results per service slot, when a sweep ran on several (the sweep's ray backend).

Each completed trial records its slot (`conditions["slot"]`, and `"node"`).
For every slot this module measures how its trials compare with their own
configuration's mean throughput (per trial: the geometric mean of short and
long tok/s, as the decisions use): the mean log ratio with a Student-t
interval, shown as a percentage. A slot whose interval lies wholly below 0
and whose mean is below `-tie_tolerance` is flagged as systematically slower.

A pass (the trials of one repeat: the block of the blocked comparison) that
ran on more than one slot is stated, and warned about when those slots'
hardware fingerprints differ. See docs/report.md "How the report is built" and docs/sweeps.md "Scale out".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ddtune.records import TrialRecord
from ddtune.stats.intervals import MeanCI, mean_ci


@dataclass
class SlotSummary:
    slot: str
    nodes: list[str]
    trials: int  # completed trials that ran there
    fingerprints: list[str]
    relative: MeanCI | None  # mean of ln(trial tok/s / its config's mean tok/s)
    slower: bool = False

    def percent(self) -> str:
        """'-3.1% [-5.0%, -1.2%]' (the interval when there is one)."""
        if self.relative is None:
            return "-"
        text = f"{_pct(self.relative.mean)}"
        if self.relative.low is not None and self.relative.high is not None:
            text += f" [{_pct(self.relative.low)}, {_pct(self.relative.high)}]"
        return text


@dataclass
class SlotReport:
    slots: list[SlotSummary]
    mixed_passes: dict[int, list[str]] = field(default_factory=dict)  # repeat → its slots
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def slot_report(
    records: Sequence[TrialRecord], confidence: float, tolerance: float
) -> SlotReport | None:
    """None unless some completed trial names its slot."""
    done = [r for r in records if r.status == "done" and r.conditions.get("slot")]
    if not done:
        return None
    ratios = _log_ratios(done)
    report = SlotReport([])
    for slot in sorted({str(r.conditions["slot"]) for r in done}):
        mine = [r for r in done if r.conditions["slot"] == slot]
        values = [ratios[r.trial_id] for r in mine if r.trial_id in ratios]
        relative = mean_ci(values, confidence) if values else None
        slower = (
            relative is not None
            and relative.high is not None
            and relative.high < 0
            and math.expm1(relative.mean) < -tolerance
        )
        report.slots.append(
            SlotSummary(
                slot,
                sorted({str(r.conditions.get("node")) for r in mine if r.conditions.get("node")}),
                len(mine),
                sorted({_fingerprint(r) for r in mine}),
                relative,
                slower,
            )
        )
    _passes(done, report)
    report.warnings += [
        f"slot {s.slot} is systematically slower: its trials ran at {s.percent()} of their "
        "configurations' mean throughput; rerun its trials elsewhere or check that slot"
        for s in report.slots
        if s.slower
    ]
    return report


def _log_ratios(done: list[TrialRecord]) -> dict[int, float]:
    """Trial id → ln(its throughput / the mean throughput of its configuration)."""
    tps = {r.trial_id: _throughput(r) for r in done}
    by_label: dict[str, list[float]] = {}
    for record in done:
        value = tps[record.trial_id]
        if value is not None:
            by_label.setdefault(record.label, []).append(value)
    means = {label: math.fsum(v) / len(v) for label, v in by_label.items()}
    return {
        r.trial_id: math.log(value / means[r.label])
        for r in done
        if (value := tps[r.trial_id]) is not None and means[r.label] > 0
    }


def _throughput(record: TrialRecord) -> float | None:
    short, long = record.metrics.get("short_tps"), record.metrics.get("long_tps")
    if short is None or long is None or short <= 0 or long <= 0:
        return None
    return math.sqrt(short * long)


def _passes(done: list[TrialRecord], report: SlotReport) -> None:
    by_pass: dict[int, list[TrialRecord]] = {}
    for record in done:
        by_pass.setdefault(record.repeat, []).append(record)
    for repeat, group in sorted(by_pass.items()):
        slots = sorted({str(r.conditions["slot"]) for r in group})
        if len(slots) < 2:
            continue
        report.mixed_passes[repeat] = slots
        report.notes.append(
            f"pass {repeat} compares configurations across slots {', '.join(slots)}"
        )
        prints = {_fingerprint(r) for r in group}
        if len(prints) > 1:
            report.warnings.append(
                f"pass {repeat} compares across slots with different hardware fingerprints "
                f"({', '.join(sorted(prints))}): its differences may come from the hardware"
            )


def _fingerprint(record: TrialRecord) -> str:
    value = record.conditions.get("hardware_fingerprint")
    return "not recorded" if value is None else str(value)


def _pct(log_ratio: float) -> str:
    return f"{math.expm1(log_ratio) * 100:+.1f}%"


__all__ = ["SlotReport", "SlotSummary", "slot_report"]
