"""Losslessness at T=0: is a trial's output text the same as the baseline's, request by request?

`compare_outputs(baseline, outputs)` says `identical` or `diverged at request
R, char C` (both 0-based: R indexes the run's T=0 outputs in request order, C
the first differing character; a missing request or a text that stops early
diverges at the shorter text's length).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class LosslessVerdict:
    identical: bool
    request: int | None  # first diverging request, None when identical
    char: int | None  # first diverging character in that request
    detail: str  # "identical" | "diverged at request R, char C" (+ a reason)

    def to_dict(self) -> dict:
        return asdict(self)


def output_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def compare_outputs(baseline_outputs: list[str], outputs: list[str]) -> LosslessVerdict:
    """First point where `outputs` differs from `baseline_outputs`."""
    for r, (base, text) in enumerate(zip(baseline_outputs, outputs, strict=False)):
        if base != text:
            c = first_difference(base, text)
            return LosslessVerdict(False, r, c, f"diverged at request {r}, char {c}")
    nb, no = len(baseline_outputs), len(outputs)
    if nb != no:
        r = min(nb, no)
        return LosslessVerdict(
            False,
            r,
            0,
            f"diverged at request {r}, char 0 (baseline has {nb} outputs, this run {no})",
        )
    return LosslessVerdict(True, None, None, "identical")


def first_difference(a: str, b: str) -> int:
    """Index of the first differing character (the shorter length when one is a prefix)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))
