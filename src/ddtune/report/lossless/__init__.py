"""Losslessness in the report: each config's T=0 outputs against the baseline's, and why they part.

`check` (one `LosslessCheck` per config, and what a pass-rate difference means),
`gaps` (a divergence classified near-tie / divergence / unclassified by the logit
gap where the outputs part). See docs/report.md "How the report is built".
"""

from ddtune.report.lossless.check import (
    LosslessCheck,
    check_losslessness,
    correctness_note,
    load_compare,
)
from ddtune.report.lossless.gaps import classify_divergence, token_gap

__all__ = [
    "LosslessCheck",
    "check_losslessness",
    "classify_divergence",
    "correctness_note",
    "load_compare",
    "token_gap",
]
