"""τ for every smaller K from one chain run's per-position acceptance counts (an estimate).

τ (the acceptance length) is the tokens a verify round commits, the bonus token
included (SGLang's convention): 1 + the draft tokens accepted. A chain method
(EAGLE, EAGLE-3, MTP at topk 1) drafts K tokens a round; its round is accepted
up to the first draft token the target rejects.

The data: one run at the largest K. Over its N rounds (vLLM:
`vllm:spec_decode_num_drafts`), count c_i, the rounds whose draft token at
position i (0-based) was accepted, i.e. whose first i + 1 tokens all were
(vLLM: `vllm:spec_decode_num_accepted_tokens_per_pos`, label `position`; a
run's acceptance note carries both, `ddtune.engines.vllm.note_counts` reads them).

The math. Let A be a round's accepted tokens at K_max; c_i / N = P(A >= i + 1).
A chain's draft at position i does not depend on K, so a round from the same
anchor at K <= K_max accepts min(A, K). Hence

    τ(K) = 1 + E[min(A, K)] = 1 + Σ_{i < K} c_i / N,

and at K = K_max it is the run's own τ, 1 + accepted / drafts. Its spread,
treating rounds as independent: P(min(A, K) >= j) = c_{j-1} / N for j <= K, so
E[X²] = Σ_{j=1..K} (2j - 1) c_{j-1} / N, and the standard error of τ(K) is
sqrt((E[X²] - E[X]²) / N).

Why it is an estimate, not exact: at another K the rounds fall at other
positions. Every round commits its accepted tokens and a bonus, so where the
drafts are easy (long accepted runs) a round at K_max jumps far and a smaller K
lands more rounds there; the K_max run under-samples the anchors a smaller K
sees. Where acceptance clusters, the estimate tends to come out low (the
interval covers sampling noise only, not this bias). `compare` puts each
estimate beside the τ measured at that K, with its error, so a report shows how
far to trust it. Numpy only; no torch, no engine. See docs/traces.md "Chains".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ddtune.errors import UserError


@dataclass(frozen=True)
class ChainCounts:
    """One run at K = len(accepted_per_position): its rounds and per-position counts."""

    drafts: int
    accepted_per_position: tuple[int, ...]

    def __post_init__(self) -> None:
        counts = self.accepted_per_position
        if self.drafts < 1:
            raise UserError(f"chain counts need at least one round (drafts); got {self.drafts}")
        if not counts:
            raise UserError("chain counts need the accepted count of at least one position")
        if any(c < 0 or c > self.drafts for c in counts):
            raise UserError(
                f"per-position accepted counts must lie in 0..drafts ({self.drafts}); "
                f"got {list(counts)}"
            )
        if any(b > a for a, b in zip(counts, counts[1:], strict=False)):
            raise UserError(
                f"per-position accepted counts must not rise with the position (a chain "
                f"accepts position i + 1 only after position i); got {list(counts)}"
            )

    @property
    def k(self) -> int:
        return len(self.accepted_per_position)

    @property
    def tau(self) -> float:
        """The run's own τ: 1 + accepted / drafts."""
        return 1.0 + sum(self.accepted_per_position) / self.drafts


@dataclass(frozen=True)
class ChainEstimate:
    """τ predicted at `k` from a run at `from_k`, with its sampling standard error."""

    k: int
    tau: float
    stderr: float
    from_k: int

    def interval(self, z: float = 1.96) -> tuple[float, float]:
        """tau ± z·stderr (sampling only: the estimate's bias is not in it)."""
        return self.tau - z * self.stderr, self.tau + z * self.stderr


def predict_tau(counts: ChainCounts, k: int) -> ChainEstimate:
    """τ at `k` (1 <= k <= the run's K) with its standard error (see the module doc)."""
    if not 1 <= k <= counts.k:
        raise UserError(
            f"a run at K = {counts.k} predicts K = 1..{counts.k}; asked for K = {k} "
            "(positions past the run's K were never drafted)"
        )
    shares = np.asarray(counts.accepted_per_position[:k], dtype=float) / counts.drafts
    mean = float(shares.sum())
    second = float(((2 * np.arange(1, k + 1) - 1) * shares).sum())
    variance = max(0.0, second - mean * mean)
    return ChainEstimate(k, 1.0 + mean, math.sqrt(variance / counts.drafts), counts.k)


def predict_all(counts: ChainCounts) -> list[ChainEstimate]:
    """τ for K = 1..the run's K (the last equals the run's own τ)."""
    return [predict_tau(counts, k) for k in range(1, counts.k + 1)]


@dataclass(frozen=True)
class ChainCheck:
    """A prediction beside the τ measured at the same K."""

    estimate: ChainEstimate
    measured: float

    @property
    def error(self) -> float:
        """predicted − measured."""
        return self.estimate.tau - self.measured

    @property
    def relative_error(self) -> float:
        return self.error / self.measured

    @property
    def inside(self) -> bool:
        """Whether the measured τ lies in the prediction's 95 % sampling interval."""
        low, high = self.estimate.interval()
        return low <= self.measured <= high


def compare(estimates: Sequence[ChainEstimate], measured: Mapping[int, float]) -> list[ChainCheck]:
    """Each estimate whose K was measured, beside that measurement (K ascending)."""
    return [
        ChainCheck(e, measured[e.k])
        for e in sorted(estimates, key=lambda e: e.k)
        if e.k in measured
    ]


def check_lines(checks: Sequence[ChainCheck]) -> list[str]:
    """A plain-words table: K, predicted τ with its interval, measured τ, error."""
    if not checks:
        return []
    lines = [
        f"τ per K predicted from the run at K = {checks[0].estimate.from_k} "
        "(an estimate: rounds fall at other positions at another K)",
        f"{'K':>3} {'predicted':>9} {'95% (sampling)':>16} {'measured':>9} {'error':>7}",
    ]
    for check in checks:
        low, high = check.estimate.interval()
        lines.append(
            f"{check.estimate.k:>3} {check.estimate.tau:>9.3f} {f'{low:.3f}-{high:.3f}':>16} "
            f"{check.measured:>9.3f} {check.error:>+7.3f}"
        )
    return lines
