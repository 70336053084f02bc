"""A restart-bound race: server starts spent only where they buy information (pure).

Where a config change is a restart that costs more than its bench (`[sweep]
restart_bound`, chosen by `strategies/restart_bound.py`), a pass of the pass-by-pass
race buys one measurement per restart. This race decides bench by bench instead. Its state is
a fold of the finished benches (`StartRace.add`), so a resumed race plans
exactly what the uninterrupted one would (`replay`); `next()` says what runs
next. Rules 1-6 (the `rule N` in method docstrings): docs/sweeps.md
"Restart-bound races".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from ddtune.records import Elimination
from ddtune.stats.blocked import BlockedOptions, Verdict, verdict_of
from ddtune.stats.mixed import (
    Component,
    Components,
    MixedFit,
    Priors,
    StartMean,
    VariancePrior,
    benches_per_start,
    decision_chance,
    estimate_components,
    fit_effects,
    start_means,
)
from ddtune.sweep.plan.races.by_pass import (
    all_equivalent,
    holm_worse,
    pass_rate_step,
    ratio_words,
)
from ddtune.sweep.plan.trial_order import block_order
from ddtune.trace.forecast import Forecast
from ddtune.trace.round_cost import ForwardProbe

# The stated priors (log-sd) before the data: a start is assumed to move a
# config's level by 3% (GPU services measure 1-2%), worth 4 df: conservative
# for pass 1, and a few second starts outweigh it where the machine is noisier
# (a shared host); a bench by 3% (2 df: the first starts' own benches replace
# it); the machine by 1% an hour (2 df: the leader's reference starts estimate it).
PRIORS = Priors(
    bench=VariancePrior(0.03, 2.0),
    start=VariancePrior(0.03, 4.0),
    drift=VariancePrior(0.01, 2.0),
)


# The level of each look. The race tests after every start and inside starts (20-60
# looks where the pass-by-pass race has 3-10), and a test repeated that often eliminates the
# true best more often: measured on a shared host (30% drift), 12% wrong answers at
# 0.05 a look, 8% at 0.02, for 0.35 h more median at production scale
# (docs/benchmarks.md, "Restart-bound races": the ablations).
ALPHA = 0.02

# Rule 6 (futility): after pass 2 (and `min_passes`), a race in which no contender has this chance of being
# separated from the leader or proven equivalent to it by the last pass stops undecided, there
# and then, instead of spending the starts left on a verdict they cannot buy.
FUTILE_CHANCE = 0.1


@dataclass(frozen=True)
class StartSettings:
    tolerance: float = 0.03
    alpha: float = ALPHA
    most_benches: int = 4  # `[sweep] passes_per_start`: benches one start may get
    max_passes: int = 10  # `[sweep] repeats`
    min_passes: int = 1  # `[sweep] min_repeats` when written: passes before `equivalent`
    max_trials: int | None = None  # benches
    max_hours: float | None = None
    start_s: float = 480.0  # expected seconds of one restart (stop + start to READY)
    bench_s: float = 75.0  # ... of one bench (one trial)
    priors: Priors = PRIORS
    anchor_every: int | None = 4  # the leader starts again after this many other starts
    fold: bool = True  # pass p + 1 in the reverse order of pass p (False: a fresh shuffle)
    sequential: bool = True  # the test after each bench (False: only after a start)
    confirmed: bool = True  # only a leader with 2+ starts eliminates (its level seen twice)

    def __post_init__(self) -> None:
        if not 1 <= self.min_passes <= self.max_passes:
            raise ValueError("need 1 <= min_passes <= max_passes")
        if self.most_benches < 1 or self.tolerance <= 0:
            raise ValueError("need most_benches >= 1 and tolerance > 0")


@dataclass(frozen=True)
class Step:
    """One trial to run: bench `bench` of the config's start `start` (bench 1: restart)."""

    label: str
    start: int
    bench: int
    pass_no: int


@dataclass(frozen=True)
class FinishedBench:
    """One finished trial as the store holds it: bench `bench` of the config's start `start`."""

    label: str
    start: int
    bench: int
    value: float | None  # the objective; None: the trial failed
    coding: tuple[int, int] | None = None  # tasks passed, run
    hours: float = 0.0  # when it ended, hours since the sweep was created (before: < 0)
    seconds: float = 0.0  # what it took (restart included), for `max_hours`
    fresh: bool | None = None  # its attempt restarted the server (None: bench == 1)
    tps: tuple[tuple[str, float], ...] = ()  # (workload, tok/s) measured: a predicting race's
    # (workload, acceptance length) measured: a predicting race checks its forecast by them
    acceptance: tuple[tuple[str, float], ...] = ()
    unpredicted: str | None = None  # why a trace cannot speak for this trial (other weights)
    probes: tuple[ForwardProbe, ...] = ()  # forward costs measured on its running server
    forecast: Forecast | None = None  # what its answers predict (n-gram: the baseline's paths)


@dataclass
class Effort:
    starts: int = 0
    benches: int = 0  # completed
    cut: int = 0  # starts the sequential test stopped before their planned benches


@dataclass
class StartRace:
    """The race after the benches `add`ed so far; `next()` is the trial to run next."""

    contenders: tuple[str, ...]
    baseline: str | None
    settings: StartSettings
    seed: int
    alive: list[str] = field(default_factory=list)
    eliminated: dict[str, Elimination] = field(default_factory=dict)
    efforts: dict[str, Effort] = field(default_factory=dict)
    pass_no: int = 0
    queue: list[str] = field(default_factory=list)  # this pass's configs not yet started
    order: list[str] = field(default_factory=list)  # this pass's order
    current: Step | None = None  # the start that goes on, at its last bench
    start_benches: int = 0  # completed benches of the latest start
    starts_done: int = 0
    last_start: dict[str, int] = field(default_factory=dict)  # label -> its latest start's number
    groups: dict[str, list[list[tuple[float, float]]]] = field(default_factory=dict)
    coding: dict[str, tuple[int, int]] = field(default_factory=dict)
    components: Components | None = None
    fit: MixedFit | None = None
    leader: str | None = None
    trials_done: int = 0
    seconds_done: float = 0.0
    stop: str | None = None

    def __post_init__(self) -> None:
        if self.baseline is not None and self.baseline not in self.contenders:
            raise ValueError(f"baseline {self.baseline!r} is not among the contenders")
        self.alive = list(self.contenders)
        self.efforts = {label: Effort() for label in self.contenders}
        self._open_pass()

    # --- what runs next ------------------------------------------------------------

    def next(self) -> Step | None:
        """The next trial; None once the race stopped."""
        if self.stop is not None:
            return None
        if self.current is not None:
            c = self.current
            return Step(c.label, c.start, c.bench + 1, c.pass_no)
        label = self.leader if self._anchor_due() else self.queue[0]
        assert label is not None
        return Step(label, self.efforts[label].starts + 1, 1, self.pass_no)

    def _anchor_due(self) -> bool:
        """Is it the leader's turn for a reference start (rule 1: the drift's witness)?"""
        every, leader = self.settings.anchor_every, self.leader
        if every is None or leader is None or leader not in self.alive or leader in self.queue:
            return False
        if not self._confirmed(leader):  # nobody leaves until it is: soon, and before a pass ends
            if not self.queue:
                return True
            every = max(1, every // 2)
        return self.starts_done - self.last_start.get(leader, 0) >= every

    def add(self, result: FinishedBench) -> None:
        """Fold in one finished trial; it must be the one `next()` planned."""
        step = self.next()
        ran = (result.label, result.start, result.bench)
        planned = None if step is None else (step.label, step.start, step.bench)
        if step is None or ran != planned:
            raise ValueError(f"{_named(ran)} ran where the race planned {_named(planned)}")
        self._record(step, result)
        self._drop(pass_rate_step(self.alive, self.coding, self.pass_no, self.settings.alpha))
        self.current = step if self._goes_on(step, result) else None
        if self.current is None:  # the start is over
            self._refit(step)
            self._settle()

    # --- bookkeeping ---------------------------------------------------------------

    def _record(self, step: Step, result: FinishedBench) -> None:
        effort = self.efforts[step.label]
        self.trials_done += 1
        self.seconds_done += result.seconds
        if step.bench == 1:
            effort.starts += 1
            self.starts_done += 1
            self.last_start[step.label] = self.starts_done
            self.start_benches = 0
            if step.label in self.queue:  # else the leader's reference start
                self.queue.remove(step.label)
        if result.coding is not None and result.coding[1] > 0:
            passed, total = self.coding.get(step.label, (0, 0))
            self.coding[step.label] = (passed + result.coding[0], total + result.coding[1])
        if not counted(result.value):
            return
        effort.benches += 1
        self.start_benches += 1
        starts = self.groups.setdefault(step.label, [])
        fresh = result.fresh if result.fresh is not None else step.bench == 1
        if fresh or not starts:
            starts.append([])
        starts[-1].append((math.log(result.value), result.hours))

    def _drop(self, removed: Sequence[Elimination]) -> None:
        for elimination in removed:
            self.alive.remove(elimination.label)
            self.eliminated[elimination.label] = elimination
            if elimination.label in self.queue:
                self.queue.remove(elimination.label)

    def _open_pass(self) -> None:
        self.pass_no += 1
        if self.pass_no == 1 or not self.settings.fold:
            self.order = block_order(self.alive, self.seed, self.pass_no)
        else:
            self.order = [label for label in reversed(self.order) if label in self.alive]
        self.queue = list(self.order)

    # --- the start in progress: go on, or stop (sequential test) -------------------

    def _goes_on(self, step: Step, result: FinishedBench) -> bool:
        if result.value is None or step.label not in self.alive:
            return False
        components = self._components()
        wanted = benches_per_start(
            components, self.settings.start_s, self.settings.bench_s, self.settings.most_benches
        )
        if components.bench.df <= self.settings.priors.bench.df:  # no start has 2 benches yet:
            wanted = max(wanted, min(2, self.settings.most_benches))  # a second one measures it
        if step.bench >= wanted:
            return False
        out = self._clearly_out(step) if self.settings.sequential else None
        if out is not None:
            self.efforts[step.label].cut += 1
            self._drop([out])
            return False
        return True

    def _clearly_out(self, step: Step) -> Elimination | None:
        """The config of the start in progress, if its leader already beats it (Bonferroni)."""
        fit = fit_effects(self._starts()[0], self._components())
        measured = [label for label in self.alive if label in fit.labels]
        leader = max(measured, key=fit.effect)
        if leader == step.label or not self._confirmed(leader):
            return None
        ratio = fit.contrast(leader, step.label)
        raw = 1.0 if ratio.p_value is None else ratio.p_value
        p = min(1.0, raw * (len(measured) - 1))
        if p >= self.settings.alpha or ratio.log_estimate <= 0:
            return None
        detail = ratio_words(leader, step.label, ratio, "mixed model", p, "Bonferroni")
        detail += f"; after bench {step.bench} of start {step.start} (sequential test)"
        return Elimination(step.label, self.pass_no, "worse", detail, p)

    # --- after a start: the model, eliminations, the pass, the stop ------------------

    def _refit(self, step: Step) -> None:
        """After a start: a start with no bench fails its config; the model; eliminations."""
        label = step.label
        if label in self.alive and self.start_benches == 0:
            detail = f"start {step.start}: no bench completed"
            self._drop([Elimination(label, self.pass_no, "failed", detail)])
        self.components = self._estimate()
        self.fit = fit_effects(self._starts()[0], self.components) if self.groups else None
        self._drop(self._worse())

    def _settle(self) -> None:
        """The stop, else the end of the pass once its queue is empty."""
        self.stop = self._stop_reason()
        if self.stop is None and not self.queue and not self._anchor_due():  # the pass is over
            if self.pass_no >= self.settings.max_passes:
                self.stop = "max_passes"
            else:
                self._open_pass()

    def _worse(self) -> list[Elimination]:
        fit = self.fit
        measured = [label for label in self.alive if fit is not None and label in fit.labels]
        if fit is None or len(measured) < 2:
            return []
        leader = self.leader = max(measured, key=fit.effect)
        if not self._confirmed(leader):
            return []
        return holm_worse(
            {x: fit.contrast(leader, x) for x in measured if x != leader},
            self.pass_no,
            self.settings.alpha,
            lambda label, ratio, p: ratio_words(leader, label, ratio, "mixed model", p),
        )

    def _confirmed(self, leader: str) -> bool:
        """A leader seen on one start only may owe its lead to that start or that moment."""
        return not self.settings.confirmed or len(self.groups.get(leader, [])) >= 2

    def _stop_reason(self) -> str | None:
        if len(self.alive) <= 1:
            return "one_left"
        passes_done = self.pass_no - (1 if self.queue else 0)
        if passes_done >= self.settings.min_passes and self._all_equivalent():
            return "equivalent"
        next_cost = self.settings.start_s + self.settings.bench_s
        if self.settings.max_trials is not None and self.trials_done >= self.settings.max_trials:
            return "max_trials"
        hours = self.settings.max_hours
        if hours is not None and self.seconds_done + next_cost > hours * 3600:
            return "max_hours"
        if passes_done >= max(2, self.settings.min_passes) and not self.queue and self._futile():
            return "futile"
        return None

    def _futile(self) -> bool:
        """Rule 6: taking each contender's measured gap to the leader as the truth, does none
        have a `FUTILE_CHANCE` of a verdict after one more start in every pass left?"""
        fit, leader, left = self.fit, self.leader, self.settings.max_passes - self.pass_no
        if fit is None or leader is None or left < 1 or not self._confirmed(leader):
            return False
        if any(x not in fit.labels for x in self.alive):
            return False
        starts = {x: len(self.groups.get(x, [])) for x in self.alive}
        margin = math.log1p(self.settings.tolerance)
        for x in self.alive:
            if x == leader:
                continue
            ratio = fit.contrast(leader, x)
            if ratio.se is None or ratio.se <= 0:
                return False
            now = 1 / starts[x] + 1 / starts[leader]
            then = 1 / (starts[x] + left) + 1 / (starts[leader] + left)
            chance = decision_chance(
                ratio.log_estimate,
                ratio.se,
                ratio.se * math.sqrt(then / now),
                margin,
                self.settings.alpha,
            )
            if chance >= FUTILE_CHANCE:
                return False
        return True

    def _all_equivalent(self) -> bool:
        fit, leader = self.fit, self.leader
        if fit is None or leader is None or any(x not in fit.labels for x in self.alive):
            return False
        return all_equivalent(
            leader, self.alive, fit.contrast, self.settings.tolerance, self.settings.alpha
        )

    # --- the model's inputs -----------------------------------------------------------

    def _starts(self) -> tuple[list[StartMean], list[list[float]]]:
        return start_means((x, group) for x, starts in self.groups.items() for group in starts)

    def _estimate(self) -> Components:
        return estimate_components(*self._starts(), self.settings.priors)

    def _components(self) -> Components:
        return self.components or self._estimate()

    # --- the answer -------------------------------------------------------------------

    def verdict(self, cost: Callable[[str], Any]) -> Verdict:
        """The race's answer among the configs still in it (the report's headline)."""
        if len(self.alive) == 1:
            return Verdict("separated", self.alive[0], self.alive[0], method="mixed")
        fit, leader = self.fit, self.leader
        if fit is None or leader is None or leader not in self.alive:
            return Verdict("no data", None, None, method="mixed")
        options = BlockedOptions(tolerance=self.settings.tolerance, alpha=self.settings.alpha)
        others = [label for label in self.alive if label != leader and label in fit.labels]
        return verdict_of(leader, {x: fit.contrast(leader, x) for x in others}, cost, options)


def counted(value: float | None) -> TypeGuard[float]:
    """Does a bench with this objective count in the race (a finite value above 0)?"""
    return value is not None and math.isfinite(value) and value > 0


def prior_benches(settings: StartSettings) -> int:
    """The benches a start gets before any data: the priors' variances and the costs."""
    p = settings.priors
    components = Components(
        Component(p.bench.sd**2, p.bench.df),
        Component(p.start.sd**2, p.start.df),
        Component(p.drift.sd**2, p.drift.df),
    )
    return benches_per_start(components, settings.start_s, settings.bench_s, settings.most_benches)


def replay(
    contenders: Sequence[str],
    baseline: str | None,
    results: Sequence[FinishedBench],
    settings: StartSettings,
    seed: int,
) -> StartRace:
    """The race after `results` (finished trials, in run order)."""
    race = StartRace(tuple(contenders), baseline, settings, seed)
    for result in results:
        race.add(result)
    return race


def _named(trial: tuple[str, int, int] | None) -> str:
    if trial is None:
        return "nothing (it had stopped)"
    label, start, bench = trial
    return f"bench {bench} of start {start} of {label}"


__all__ = [
    "ALPHA",
    "FUTILE_CHANCE",
    "PRIORS",
    "FinishedBench",
    "Effort",
    "StartRace",
    "StartSettings",
    "Step",
    "counted",
    "prior_benches",
    "replay",
]
