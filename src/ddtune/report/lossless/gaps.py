"""Near-tie or divergence: the logit gap at the point where two T=0 outputs part.

On GPU servers batching and kernels shift the numerics, so two configs' T=0
outputs can part where the top two tokens were nearly tied, without any bug.
When both runs recorded logit gaps (`ddtune.bench.gaps`), the divergence at
request R, char C is classified by the smaller top-1 minus top-2 logprob of
the token covering C in either run: `near-tie` below the threshold
(`[report] near_tie_gap`, nats), else `divergence`; `unclassified` when no gap
applies. See docs/report.md "How the report is built".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

GapEntries = Sequence[dict[str, Any] | None] | None


@dataclass(frozen=True)
class GapClass:
    kind: str  # "near-tie" | "divergence" | "unclassified"
    gap: float | None  # nats, the smaller of the two runs' gaps at the divergence
    text: str  # words for the report


def classify_divergence(
    reference: GapEntries, run: GapEntries, request: int, char: int, threshold: float
) -> GapClass:
    """Classify the divergence at (`request`, `char`) from the two runs' recorded gaps."""
    if not reference or not run:
        return GapClass("unclassified", None, "unclassified: no logit gaps recorded")
    both = (token_gap(reference, request, char), token_gap(run, request, char))
    found = [g for g in both if g is not None]
    if not found:
        return GapClass("unclassified", None, "unclassified: no logit gap at the divergence")
    gap = min(found)
    if gap < threshold:
        words = f"near-tie (top-1/top-2 gap {gap:.4f} nats < {threshold:g})"
        return GapClass("near-tie", gap, words)
    words = f"divergence (top-1/top-2 gap {gap:.4f} nats >= {threshold:g}: a bug or a lossy mode)"
    return GapClass("divergence", gap, words)


def token_gap(entries: Sequence[dict[str, Any] | None], request: int, char: int) -> float | None:
    """The gap of the token covering `char` (the last one starting at or before it).

    None when the request has no entry, no token starts at or before `char`, or
    the gap run's text parted from the streamed output before that token began.
    """
    entry = entries[request] if 0 <= request < len(entries) else None
    if not entry:
        return None
    offsets, gaps = entry.get("offsets") or [], entry.get("gaps") or []
    starts = [i for i, o in enumerate(offsets) if o <= char]
    if not starts or starts[-1] >= len(gaps):
        return None
    i = starts[-1]
    if offsets[i] > int(entry.get("agree", -1)):
        return None
    gap = gaps[i]
    return float(gap) if gap is not None else None
