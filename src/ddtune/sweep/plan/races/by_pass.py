"""Racing (F-Race style): which configs stay in the race after each pass, and when to stop.

Pure and deterministic: `replay` takes the finished passes (what the store
holds) and returns the same `RaceState` every time, so a resumed race plans
its next pass exactly as the uninterrupted one would have. Rules: the race rules of
docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ddtune.records import Elimination
from ddtune.stats.blocked import BlockedOptions, compare, leader_of
from ddtune.stats.intervals import (
    RatioInterval,
    fisher_exact_two_sided,
    holm_adjust,
    tost_equivalence,
)


@dataclass(frozen=True)
class RaceSettings:
    min_passes: int = 3  # `[sweep] min_repeats`
    max_passes: int = 10  # `[sweep] repeats`
    tolerance: float = 0.03
    alpha: float = 0.05
    max_trials: int | None = None
    max_hours: float | None = None

    def __post_init__(self) -> None:
        if not 2 <= self.min_passes <= self.max_passes:
            raise ValueError("need 2 <= min_passes <= max_passes")
        if self.tolerance <= 0:
            raise ValueError("tolerance must be > 0")


@dataclass(frozen=True)
class PassResult:
    """One finished pass: the objective of each config that ran (None = failed trial)."""

    values: Mapping[str, float | None]
    coding: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # label -> passed, total
    seconds: float = 0.0  # summed trial durations (stored, so a replay sees the same)


@dataclass(frozen=True)
class RaceStep:
    pass_no: int
    leader: str | None
    alive: tuple[str, ...]
    eliminated: tuple[Elimination, ...]


@dataclass
class RaceState:
    contenders: tuple[str, ...]
    baseline: str | None
    settings: RaceSettings
    alive: list[str]
    eliminated: dict[str, Elimination] = field(default_factory=dict)
    history: list[RaceStep] = field(default_factory=list)
    passes_done: int = 0
    trials_done: int = 0
    seconds_done: float = 0.0
    leader: str | None = None
    stop: str | None = None
    samples: dict[str, dict[int, float]] = field(default_factory=dict)  # label -> pass -> value
    coding: dict[str, tuple[int, int]] = field(default_factory=dict)  # label -> passed, total

    def scheduled(self) -> list[str]:
        """Configs of the next pass in contender order (baseline + alive); [] once stopped."""
        if self.stop is not None:
            return []
        keep = set(self.alive) | ({self.baseline} if self.baseline else set())
        return [c for c in self.contenders if c in keep]


def replay(
    contenders: Sequence[str],
    baseline: str | None,
    passes: Sequence[PassResult],
    settings: RaceSettings,
) -> RaceState:
    """The race state after `passes` (finished passes only, in order)."""
    if baseline is not None and baseline not in contenders:
        raise ValueError(f"baseline {baseline!r} is not among the contenders")
    state = RaceState(tuple(contenders), baseline, settings, list(contenders))
    for pass_no, result in enumerate(passes, start=1):
        if state.stop is not None:
            raise ValueError(f"pass {pass_no} ran after the race stopped ({state.stop})")
        _record(state, result)
        removed = _step(state) if pass_no >= settings.min_passes else []
        state.history.append(RaceStep(pass_no, state.leader, tuple(state.alive), tuple(removed)))
        state.stop = _stop_reason(state)
    return state


def _record(state: RaceState, result: PassResult) -> None:
    """Fold in one pass: failed trials count as trials, never as measurements (only
    positive, finite values do); the coding counts pool."""
    state.passes_done += 1
    state.trials_done += len(result.values)
    state.seconds_done += result.seconds
    for label, value in result.values.items():
        if value is not None and math.isfinite(value) and value > 0:
            state.samples.setdefault(label, {})[state.passes_done] = value
    for label, (passed, total) in result.coding.items():
        pooled = state.coding.get(label, (0, 0))
        state.coding[label] = (pooled[0] + passed, pooled[1] + total)


def _step(state: RaceState) -> list[Elimination]:
    pass_no, samples = state.passes_done, state.samples
    removed = [
        Elimination(label, pass_no, "failed", f"{len(samples.get(label, {}))} completed trial(s)")
        for label in state.alive
        if len(samples.get(label, {})) < 2
    ]
    _drop(state, removed)
    removed += _drop(
        state, pass_rate_step(state.alive, state.coding, pass_no, state.settings.alpha)
    )
    alive = {label: samples[label] for label in state.alive}
    leader = state.leader = leader_of(alive) if alive else None
    if leader is not None:
        contrast = _contrast(state)
        worse = holm_worse(
            {x: contrast(leader, x) for x in alive if x != leader},
            pass_no,
            state.settings.alpha,
            lambda label, r, p: ratio_words(leader, label, r, f"{r.method}, {r.n} passes", p),
        )
        removed += _drop(state, worse)
    return removed


def _contrast(state: RaceState) -> Callable[[str, str], RatioInterval]:
    """One config over another by their passes (paired over the passes both completed)."""
    options = BlockedOptions(alpha=state.settings.alpha)
    return lambda a, b: compare(state.samples[a], state.samples[b], options)


def _drop(state: RaceState, removed: list[Elimination]) -> list[Elimination]:
    for elimination in removed:
        state.alive.remove(elimination.label)
        state.eliminated[elimination.label] = elimination
    return removed


def holm_worse(
    contrasts: Mapping[str, RatioInterval],
    pass_no: int,
    alpha: float,
    words: Callable[[str, RatioInterval, float], str],
) -> list[Elimination]:
    """The configs the leader beats (`worse`): `contrasts` holds the leader over each, their p
    values Holm-adjusted together (none: 1); out where p < alpha and the leader is ahead, with
    `words(label, ratio, p)` as the detail."""
    raw = [1.0 if ratio.p_value is None else ratio.p_value for ratio in contrasts.values()]
    return [
        Elimination(label, pass_no, "worse", words(label, ratio, p), p)
        for (label, ratio), p in zip(contrasts.items(), holm_adjust(raw), strict=True)
        if p < alpha and ratio.log_estimate > 0
    ]


def ratio_words(
    leader: str, label: str, ratio: RatioInterval, how: str, p: float, correction: str = "Holm"
) -> str:
    """A `worse` elimination's detail: the leader over `label`, its interval where it has one,
    how it was estimated and the corrected p."""
    interval = f" [{ratio.low:.3f}, {ratio.high:.3f}]" if ratio.low is not None else ""
    return f"{leader} / {label} = {ratio.ratio:.3f}{interval} ({how}), {correction} p = {p:.3g}"


def all_equivalent(
    leader: str,
    labels: Iterable[str],
    contrast: Callable[[str, str], RatioInterval],
    tolerance: float,
    alpha: float,
) -> bool:
    """Is every config of `labels` but the leader within `tolerance` of it (TOST at `alpha`
    on `contrast(leader, label)`)?"""
    return all(
        tost_equivalence(contrast(leader, label), tolerance, alpha).equivalent
        for label in labels
        if label != leader
    )


def pass_rate_step(
    alive: Sequence[str], coding: Mapping[str, tuple[int, int]], pass_no: int, alpha: float
) -> list[Elimination]:
    """Configs whose pooled pass rate is below the best one's (Fisher, Holm p < alpha)."""
    measured = [label for label in alive if coding.get(label, (0, 0))[1] > 0]
    if len(measured) < 2:
        return []
    best = min(measured, key=lambda s: (-coding[s][0] / coding[s][1], -coding[s][1]))
    others = [label for label in measured if label != best]
    bp, bt = coding[best]
    raw = [fisher_exact_two_sided(*coding[label], bp, bt) for label in others]
    removed = []
    for label, p in zip(others, holm_adjust(raw), strict=True):
        passed, total = coding[label]
        if p < alpha and passed / total < bp / bt:
            detail = f"pass rate {passed}/{total} vs {bp}/{bt} ({best}), Fisher, Holm p = {p:.3g}"
            removed.append(Elimination(label, pass_no, "pass_rate", detail, p))
    return removed


def _stop_reason(state: RaceState) -> str | None:
    """Why the race stops after these passes, or None; never before `min_passes`
    (the first `min_passes` passes are planned together, so every one of them runs)."""
    settings = state.settings
    if state.passes_done < settings.min_passes:
        return None
    if len(state.alive) <= 1:
        return "one_left"
    leader = state.leader
    if leader is not None and all_equivalent(
        leader, state.alive, _contrast(state), settings.tolerance, settings.alpha
    ):
        return "equivalent"
    if state.passes_done >= settings.max_passes:
        return "max_passes"
    next_trials = len(state.scheduled())
    if settings.max_trials is not None and state.trials_done + next_trials > settings.max_trials:
        return "max_trials"
    if settings.max_hours is not None and state.trials_done:
        per_trial = state.seconds_done / state.trials_done
        if state.seconds_done + per_trial * next_trials > settings.max_hours * 3600:
            return "max_hours"
    return None


__all__ = [
    "PassResult",
    "RaceSettings",
    "RaceState",
    "RaceStep",
    "all_equivalent",
    "holm_worse",
    "pass_rate_step",
    "ratio_words",
    "replay",
]
