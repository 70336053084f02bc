"""Blocked (paired) comparisons and the separated / equivalent / inconclusive verdict.

With interleaved order every pass is a block measured under one machine state,
so configs are compared within a pass (paired t on per-pass log ratios) and the
pass-to-pass drift drops out. Without blocks (random or sequential order, or
fewer than two passes in common) the comparison falls back to Welch on the logs.
Decision rules (docs/report.md "How the report is built"):

- *leader*: the best config effect (blocked: additive pass + config model on
  the logs, so missed passes do not bias it; else the geometric mean);
- a config is *equivalent* to the leader when the (1 - 2·alpha) interval of
  their ratio lies inside [1/(1+tol), 1+tol] (two one-sided tests), and
  *separated* when the (confidence) interval of leader/config excludes 1;
- verdict `separated` when every other config is separated from the leader,
  `equivalent` when every other config is separated or equivalent and at least
  one is equivalent (the cheapest of the leader and its equivalents is
  recommended), else `inconclusive` with the passes a paired test would need.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ddtune.stats.intervals import (
    Equivalence,
    RatioInterval,
    paired_log_ratio,
    required_pairs,
    required_repeats,
    tost_equivalence,
    welch_log_ratio,
)

Samples = Mapping[int, float]  # pass number -> objective value of a completed trial
Status = Literal["separated", "equivalent", "inconclusive", "no data"]


@dataclass(frozen=True)
class BlockedOptions:
    tolerance: float = 0.03  # relative equivalence margin
    alpha: float = 0.05  # each one-sided test of TOST; the paired/Welch tests' level
    confidence: float = 0.95  # level of the reported intervals
    power: float = 0.80  # of the "passes needed" estimate
    blocked: bool = True  # False: random/sequential order, always Welch
    maximize: bool = True  # False for objectives where lower is better (latency)


@dataclass
class Verdict:
    status: Status
    label: str | None  # the recommended config
    leader: str | None  # the highest geometric mean
    equivalent: list[str] = field(default_factory=list)  # within tolerance of the leader
    contenders: list[str] = field(default_factory=list)  # neither separated nor equivalent
    separated: list[str] = field(default_factory=list)
    comparisons: dict[str, RatioInterval] = field(default_factory=dict)  # leader / config
    equivalence: dict[str, Equivalence] = field(default_factory=dict)
    method: str = "paired"  # "paired", "welch" or "paired+welch" (mixed)
    required_passes: int | None = None  # to separate the nearest contender
    nearest: str | None = None


def block_of(repeat: int, passes_per_start: int = 1) -> int:
    """The block (1-based) of a pass: `passes_per_start` consecutive passes share one start."""
    return (repeat - 1) // passes_per_start + 1


def compare(a: Samples, b: Samples, options: BlockedOptions) -> RatioInterval:
    """Ratio a/b: paired over the passes both completed, else Welch over all values."""
    if not a or not b:
        raise ValueError("compare needs values for both configs")
    common = sorted(set(a) & set(b))
    x, y = _oriented(a, options), _oriented(b, options)
    if options.blocked and len(common) >= 2:
        return paired_log_ratio([x[p] for p in common], [y[p] for p in common], options.confidence)
    return welch_log_ratio(list(x.values()), list(y.values()), options.confidence)


def geometric_mean(values: Samples) -> float:
    return statistics.geometric_mean(values.values())


def decide(
    samples: Mapping[str, Samples],
    cost: Callable[[str], Any],
    options: BlockedOptions | None = None,
) -> Verdict:
    """The verdict over `samples` (label -> pass -> value); `cost(label)` orders cheapness."""
    options = options or BlockedOptions()
    present = {label: s for label, s in samples.items() if s}
    if not present:
        return Verdict("no data", None, None)
    leader = leader_of(present, options.maximize, options.blocked)
    comparisons = {
        label: compare(present[leader], values, options)
        for label, values in present.items()
        if label != leader
    }
    return verdict_of(leader, comparisons, cost, options)


def verdict_of(
    leader: str,
    comparisons: Mapping[str, RatioInterval],
    cost: Callable[[str], Any],
    options: BlockedOptions,
) -> Verdict:
    """The verdict from the leader's ratio to every other config (leader / config)."""
    verdict = Verdict("separated", leader, leader)
    for label, ratio in comparisons.items():
        _classify(verdict, label, ratio, options)
    methods = sorted({c.method for c in verdict.comparisons.values()})
    verdict.method = "+".join(methods) if methods else ("paired" if options.blocked else "welch")
    if verdict.contenders:
        verdict.status = "inconclusive"
        _passes_needed(verdict, options)
    elif verdict.equivalent:
        verdict.status = "equivalent"
        verdict.label = min([leader, *verdict.equivalent], key=lambda s: (cost(s), s))
    return verdict


def leader_of(samples: Mapping[str, Samples], maximize: bool = True, blocked: bool = True) -> str:
    """The label with the best config effect (first in order on exact ties).

    Blocked: the effects of the additive model log y = pass + config (least
    squares), so a config that missed a pass is not judged by that pass's
    machine state; otherwise the log geometric means.
    """
    sign = 1.0 if maximize else -1.0
    effects = config_effects(samples) if blocked else _log_means(samples)
    return max(samples, key=lambda label: sign * effects[label])


def config_effects(samples: Mapping[str, Samples]) -> dict[str, float]:
    """Config effects (log scale) of log y[p, c] = pass[p] + config[c], fitted by least squares.

    With complete passes the differences are the mean log ratios; the level is
    only identified up to a constant, so only differences carry meaning.
    """
    labels = [label for label in samples if samples[label]]
    passes = sorted({p for label in labels for p in samples[label]})
    cells = [(label, p) for label in labels for p in sorted(samples[label])]
    if len(passes) < 2:
        return _log_means(samples)
    column = {p: i for i, p in enumerate(passes)}
    design = np.zeros((len(cells), len(passes) + len(labels)))
    for row, (label, p) in enumerate(cells):
        design[row, column[p]] = 1.0
        design[row, len(passes) + labels.index(label)] = 1.0
    target = np.array([math.log(samples[label][p]) for label, p in cells])
    fitted = np.linalg.lstsq(design, target, rcond=None)[0][len(passes) :]
    return {label: float(v) for label, v in zip(labels, fitted, strict=True)}


def _log_means(samples: Mapping[str, Samples]) -> dict[str, float]:
    return {label: math.log(geometric_mean(values)) for label, values in samples.items() if values}


def _classify(verdict: Verdict, label: str, ratio: RatioInterval, options: BlockedOptions) -> None:
    verdict.comparisons[label] = ratio
    equivalence = tost_equivalence(ratio, options.tolerance, options.alpha)
    verdict.equivalence[label] = equivalence
    if equivalence.equivalent:
        verdict.equivalent.append(label)
    elif ratio.separated and ratio.log_estimate > 0:
        verdict.separated.append(label)
    else:
        verdict.contenders.append(label)


def _passes_needed(verdict: Verdict, options: BlockedOptions) -> None:
    nearest = min(verdict.contenders, key=lambda s: verdict.comparisons[s].log_estimate)
    ratio = verdict.comparisons[nearest]
    verdict.nearest = nearest
    if ratio.se is None or ratio.method == "mixed":  # a restart-bound race: starts, not passes
        return
    if ratio.method == "paired":
        sd = ratio.se * math.sqrt(ratio.n)
        verdict.required_passes = required_pairs(
            ratio.log_estimate, sd, options.alpha, options.power
        )
    else:
        sd = ratio.se * math.sqrt(ratio.n / 2)
        verdict.required_passes = required_repeats(
            ratio.log_estimate, sd, sd, options.alpha, options.power
        )


def _oriented(values: Samples, options: BlockedOptions) -> dict[int, float]:
    """Values such that higher is better (1/x for minimised objectives)."""
    if options.maximize:
        return dict(values)
    return {p: 1.0 / v for p, v in values.items()}


__all__ = [
    "BlockedOptions",
    "Verdict",
    "block_of",
    "compare",
    "config_effects",
    "decide",
    "geometric_mean",
    "leader_of",
    "verdict_of",
]
