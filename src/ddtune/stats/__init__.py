"""Statistics shared by the sweep (racing, search) and the report: intervals and verdicts.

    from ddtune.stats import decide, BlockedOptions, mean_ci, wilson_interval
    verdict = decide({"a": {1: 10.2, 2: 10.4}, "b": {1: 9.1, 2: 9.3}}, BlockedOptions())

`intervals.py`: mean and Welch intervals, Wilson intervals, Fisher's exact
test, ratio intervals, TOST equivalence, Holm's correction, power and
variance components. `blocked.py`: paired (blocked) comparisons of configs
measured pass by pass and the separated / equivalent / inconclusive verdict.
`mixed.py`: restart-bound measurements (config + start effect + bench noise +
drift in time), pooled variance components and GLS contrasts.
Nothing here knows where the numbers came from.
"""

from ddtune.stats.blocked import BlockedOptions, Verdict, block_of, compare, decide, leader_of
from ddtune.stats.intervals import (
    MeanCI,
    RatioInterval,
    fisher_exact_two_sided,
    holm_adjust,
    mean_ci,
    positive_mean_ci,
    tost_equivalence,
    wilson_interval,
)

__all__ = [
    "BlockedOptions",
    "MeanCI",
    "RatioInterval",
    "Verdict",
    "block_of",
    "compare",
    "decide",
    "fisher_exact_two_sided",
    "holm_adjust",
    "leader_of",
    "mean_ci",
    "positive_mean_ci",
    "tost_equivalence",
    "wilson_interval",
]
