"""Chains predicted: τ for every smaller K from one run's per-position acceptance counts.

    counts = ChainCounts(drafts=160, accepted_per_position=(128, 96, 64))
    predict_all(counts)                 # τ at K = 1, 2, 3 (an estimate; see `predict`)
    compare(predict_all(counts), {1: 1.81, 2: 2.43})   # beside measured τ, with the error

For chain methods (EAGLE, EAGLE-3, MTP at topk 1): a draft token at position i
does not depend on K, so the run at the largest K tells every smaller one, up
to where its rounds fall (`predict` explains the math and the bias). Numpy only.
"""

from ddtune.trace.chains.predict import (
    ChainCheck,
    ChainCounts,
    ChainEstimate,
    check_lines,
    compare,
    predict_all,
    predict_tau,
)

__all__ = [
    "ChainCheck",
    "ChainCounts",
    "ChainEstimate",
    "check_lines",
    "compare",
    "predict_all",
    "predict_tau",
]
