"""Chain predictions against ground truth: exact sums, unbiased where anchors do not matter,
low where acceptance clusters (the stated bias), and the comparison table."""

from __future__ import annotations

import numpy as np
import pytest

from ddtune.engines.vllm import note_counts
from ddtune.errors import UserError
from ddtune.trace.chains import (
    ChainCounts,
    check_lines,
    compare,
    predict_all,
    predict_tau,
)


def decode(matches: list[int], k: int) -> ChainCounts:
    """Ground truth: the rounds of a K-token chain over a path whose anchor at position t
    would accept matches[t] tokens (capped at K); each round moves on by accepted + 1."""
    counts, drafts, t = [0] * k, 0, 0
    while t < len(matches):
        accepted = min(matches[t], k)
        drafts += 1
        for i in range(accepted):
            counts[i] += 1
        t += accepted + 1
    return ChainCounts(drafts, tuple(counts))


def test_tau_is_one_plus_the_shares_of_the_first_k_positions() -> None:
    counts = ChainCounts(100, (80, 60, 30))
    assert [e.tau for e in predict_all(counts)] == pytest.approx([1.8, 2.4, 2.7])
    assert predict_tau(counts, 3).tau == pytest.approx(counts.tau)  # the run's own
    # min(A, 1) is 1 on 80 rounds of 100: variance 0.8 * 0.2
    assert predict_tau(counts, 1).stderr == pytest.approx(np.sqrt(0.16 / 100))
    # A at K = 3: 3 on 30 rounds, 2 on 30, 1 on 20, 0 on 20
    values = [3] * 30 + [2] * 30 + [1] * 20 + [0] * 20
    assert predict_tau(counts, 3).stderr == pytest.approx(np.std(values) / 10)


def test_unbiased_where_every_anchor_accepts_alike() -> None:
    """Match lengths drawn independently of the position: the K_max run's rounds sample the
    same distribution a smaller K meets, so the estimate is right up to sampling noise."""
    draws = np.random.default_rng(0).geometric(0.35, size=40_000) - 1
    matches = [min(int(d), 9) for d in draws]
    top = decode(matches, 6)
    for estimate in predict_all(top)[:-1]:
        truth = decode(matches, estimate.k).tau
        low, high = estimate.interval(z=4)
        assert low <= truth <= high, (estimate, truth)
        assert abs(estimate.tau - truth) < 0.02


def test_low_where_acceptance_clusters_as_the_docstring_says() -> None:
    """Easy stretches (every anchor accepts 8) between hard ones (0): at K = 6 a round jumps
    7 tokens through an easy stretch, at K = 1 it lands 3.5 times as many rounds there."""
    matches = ([8] * 14 + [0] * 6) * 200
    top = decode(matches, 6)
    checks = compare(predict_all(top), {k: decode(matches, k).tau for k in range(1, 7)})
    assert [c.estimate.k for c in checks] == [1, 2, 3, 4, 5, 6]
    assert checks[-1].error == pytest.approx(0.0)  # K_max is the run itself
    for check in checks[:-1]:
        assert check.error < -0.05, check
        assert not check.inside  # the interval is sampling only, as stated


def test_errors_say_what_is_wrong() -> None:
    with pytest.raises(UserError, match="must not rise"):
        ChainCounts(10, (3, 5))
    with pytest.raises(UserError, match="0..drafts"):
        ChainCounts(10, (11,))
    with pytest.raises(UserError, match="at least one round"):
        ChainCounts(0, (0,))
    with pytest.raises(UserError, match="predicts K = 1..2"):
        predict_tau(ChainCounts(10, (5, 2)), 3)


def test_counts_from_a_vllm_note_and_the_comparison_table() -> None:
    note = (
        "vLLM counters: 288 accepted tokens over 160 drafts; accepted per draft position "
        "0.80 0.60 0.40 (128 96 64 of 160 drafts)"
    )
    counts = ChainCounts(*note_counts(note))
    assert counts.accepted_per_position == (128, 96, 64) and counts.k == 3
    assert counts.tau == pytest.approx(1 + 288 / 160)
    checks = compare(predict_all(counts), {1: 1.85, 3: 2.8})
    assert [c.estimate.k for c in checks] == [1, 3]
    assert checks[0].error == pytest.approx(-0.05)
    assert checks[0].relative_error == pytest.approx(-0.05 / 1.85)
    lines = check_lines(checks)
    assert lines[0].startswith("τ per K predicted from the run at K = 3 (an estimate")
    assert lines[2].split() == ["1", "1.800", "1.738-1.862", "1.850", "-0.050"]
    assert check_lines([]) == []
