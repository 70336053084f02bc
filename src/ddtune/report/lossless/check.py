"""Losslessness at T=0 and what a correctness difference between configs means.

Every ddtune mode (ar, dflash, ddtree) is lossless: at temperature 0 it must
produce the baseline's text token for token. So a pass-rate difference between
two configurations is never a trade-off; it is either *divergence* (the outputs
differ from the baseline's) or *noise* (identical outputs, different test
verdicts, or sampling at T > 0 with no significant difference).

The text comparison itself is `ddtune.bench.compare_outputs` (imported lazily,
so the report still renders, saying "not checked", where bench is unavailable).
A divergence is classified near-tie / divergence / unclassified by the logit
gap at the point where the outputs part (`ddtune.report.lossless.gaps`).
See docs/report.md "How the report is built".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ddtune.records import TrialRecord
from ddtune.report.lossless.gaps import classify_divergence

if TYPE_CHECKING:
    from ddtune.bench.lossless import LosslessVerdict

Compare = Callable[[list[str], list[str]], "LosslessVerdict"]  # (baseline, outputs) -> verdict


@dataclass
class LosslessCheck:
    status: str  # "identical" | "diverged" | "reference" | "not checked"
    text: str  # words for the report
    request: int | None = None  # first diverging request (as compare_outputs numbers it)
    char: int | None = None  # first diverging character in that request
    repeats_checked: int = 0
    divergence_class: str | None = None  # diverged: "near-tie" | "divergence" | "unclassified"
    gap: float | None = None  # nats: top-1 minus top-2 logprob at the divergence


def load_compare() -> Compare | None:
    """`ddtune.bench.compare_outputs`, or None when bench does not provide it."""
    try:
        from ddtune.bench import compare_outputs
    except ImportError:
        return None
    return compare_outputs


def check_losslessness(
    by_label: dict[str, list[TrialRecord]],
    baseline_label: str | None,
    compare: Compare | None,
    near_tie_gap: float = 0.1,
) -> dict[str, LosslessCheck]:
    """One verdict per label: its T=0 outputs against the baseline's first recorded outputs.

    A divergence is classified by the logit gap there, near-tie below `near_tie_gap` nats.
    """
    reference = _reference_record(by_label.get(baseline_label, [])) if baseline_label else None
    verdicts = {}
    for label, records in by_label.items():
        is_baseline = label == baseline_label
        verdicts[label] = _verdict(is_baseline, records, reference, compare, near_tie_gap)
    return verdicts


def _verdict(
    is_baseline: bool,
    records: list[TrialRecord],
    reference_record: TrialRecord | None,
    compare: Compare | None,
    near_tie_gap: float,
) -> LosslessCheck:
    done = [r for r in records if r.status == "done" and r.outputs]
    if any(r.temperature > 0 for r in records):
        return LosslessCheck("not checked", "not checked: T > 0 (sampled outputs differ by design)")
    if reference_record is None:
        return LosslessCheck("not checked", "not checked: no baseline outputs at T = 0")
    if not done:
        return LosslessCheck("not checked", "not checked: no outputs recorded")
    if compare is None:
        return LosslessCheck("not checked", "not checked: ddtune.bench.compare_outputs unavailable")
    for record in done:
        verdict = compare(reference_record.outputs, record.outputs)
        if not verdict.identical:
            return _diverged(verdict, is_baseline, record, reference_record, near_tie_gap, done)
    if is_baseline:
        agree = "identical to each other" if len(done) > 1 else "recorded"
        text = f"reference (baseline, {len(done)} repeat(s) {agree})"
        return LosslessCheck("reference", text, repeats_checked=len(done))
    return LosslessCheck(
        "identical", f"identical to the baseline ({len(done)} repeat(s))", repeats_checked=len(done)
    )


def _diverged(
    verdict: LosslessVerdict,
    is_baseline: bool,
    record: TrialRecord,
    reference: TrialRecord,
    near_tie_gap: float,
    done: list[TrialRecord],
) -> LosslessCheck:
    """The "diverged" check, its divergence classified by the logit gap there."""
    request, char = verdict.request or 0, verdict.char or 0
    found = classify_divergence(
        reference.logprob_gaps, record.logprob_gaps, request, char, near_tie_gap
    )
    who = "baseline repeat" if is_baseline else "repeat"
    text = f"{verdict.detail} ({who} {record.repeat}; request and char count from 0); {found.text}"
    if is_baseline:
        text += "; the baseline itself is not deterministic, so divergence elsewhere may be noise"
    return LosslessCheck(
        "diverged", text, verdict.request, verdict.char, len(done), found.kind, found.gap
    )


def _reference_record(baseline_records: list[TrialRecord]) -> TrialRecord | None:
    for record in sorted(baseline_records, key=lambda r: r.repeat):
        if record.status == "done" and record.outputs and record.temperature == 0:
            return record
    return None


def correctness_note(
    verdict: LosslessCheck | None,
    reference_verdict: LosslessCheck | None,
    fisher_p: float | None,
    alpha: float,
) -> str:
    """Why a config's pass rate differs from the reference's: divergence or noise, never a trade-off."""
    if verdict is not None and verdict.status == "diverged":
        if verdict.divergence_class == "near-tie":
            return (
                f"near-tie divergence: outputs {verdict.text}; numerics (batching, kernels) can "
                "flip a near-tie, so the pass-rate difference follows from it, not a trade-off"
            )
        return (
            f"divergence: outputs {verdict.text}; a lossless method should match the baseline, "
            "so the pass-rate difference follows from that divergence, not a trade-off"
        )
    both_identical = (
        verdict is not None
        and reference_verdict is not None
        and verdict.status in ("identical", "reference")
        and reference_verdict.status in ("identical", "reference")
    )
    if both_identical:
        return "noise: identical T=0 outputs, different test verdicts (flaky test execution), not a trade-off"
    if fisher_p is not None and fisher_p >= alpha:
        return f"noise: not significant (Fisher p = {fisher_p:.2f}); outputs not compared"
    return (
        "significant difference with outputs not compared: for a lossless method this points "
        "at divergence (check the T=0 outputs), not at a trade-off"
    )
