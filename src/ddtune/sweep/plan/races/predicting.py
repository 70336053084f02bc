"""Predict, then confirm: a forecast decides which configs are worth a start; starts confirm it.

`[sweep] strategy = "predict"`. A forecast (`ddtune.trace.forecast.Forecast`) fixes
each config's tokens a round (from a trace for trees, the baseline's T = 0 outputs
for n-gram, one run's per-position counts for chains); what a round costs is a
model that learns (`ddtune.trace.round_cost.CostModel`), refitted after every start,
with the forward probes of the running baseline where the engine allows them.
`PredictRace` is a `StartRace` (every rule of `by_start.py` holds for the configs
it starts) with six more, all a pure fold of the finished benches, so a resumed
race decides as the uninterrupted one. Rules 1-6 (the `rule N` in method
docstrings): docs/sweeps.md "Predict, then confirm".
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import geometric_mean

import numpy as np

from ddtune.records import Elimination, PredictedConfig
from ddtune.sweep.plan.races.by_start import FinishedBench, StartRace, Step
from ddtune.trace.chains.forecast import merged
from ddtune.trace.forecast import Forecast
from ddtune.trace.round_cost import CostModel, ForwardProbe, Observation, Shape

PRUNE_LEVEL = 0.95  # a config is out when its 97.5% point is below the leader's level
CHECK_LEVEL = 0.99  # a measurement outside the 99% prediction interval is a miss
CHECK_SPAN = 1.5  # an interval wider than this (high / low) checks nothing yet
TAU_TOLERANCE = 0.05  # measured acceptance this far from the prediction is a miss
SPREAD_FLOOR = 0.02  # the least log-spread of a correction a group has not measured
GROUP_SPREAD = 0.01  # ... and of one its group measured (a measured τ's own noise)
Z_PRUNE = 1.959964  # the same level for what an acceptance correction may still be off
LEFT_OUT = {"dominated": "dominated", "predicted": "predicted out"}  # exit reason -> status


@dataclass
class PredictRace(StartRace):
    forecast: Forecast | None = None
    probes: Sequence[ForwardProbe] = ()  # the running baseline's forward costs
    left_out: list[str] = field(default_factory=list)  # dominated or predicted out, in order
    tps: dict[tuple[str, int], dict[str, list[float]]] = field(default_factory=dict)
    model: CostModel | None = None
    checked: dict[str, str] = field(default_factory=dict)  # label -> its check, in words
    missed: dict[str, str] = field(default_factory=dict)  # label -> its first miss, in words
    confirmed: set[str] = field(default_factory=set)  # measured as predicted (rule 4), now
    accepted: dict[str, dict[str, float]] = field(default_factory=dict)  # label -> workload -> τ
    # label -> workload -> (measured τ - 1) / (predicted τ - 1)
    ratios: dict[str, dict[str, float]] = field(default_factory=dict)
    pinned: list[str] = field(default_factory=list)  # pass 1's first starts (rule 2)
    fallback: str | None = None  # why the forecast was dropped (the service's other models)
    awaiting: bool = False  # the forecast comes with the baseline's first bench (n-gram)
    # ... and with these configs' first benches (a chain group's largest K: its counts)
    anchors: tuple[str, ...] = ()
    partial: Forecast | None = None  # what the benches awaited have said so far
    heard: set[str] = field(default_factory=set)  # ... and which of them
    probing: bool = False  # the baseline's first bench times forwards: no pins but it
    # the benches of the baseline's start in an earlier sweep of this service and bench (rule 6)
    earlier: tuple[FinishedBench, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.earlier:
            self._reuse()

    # --- pass 1: who is worth a start ------------------------------------------------

    def _open_pass(self) -> None:
        """Pass 1 from the forecast (rules 1 and 2); it ends when nothing left could beat the
        leader, and later passes start only the configs measured and still in the race
        (second starts for close contenders)."""
        if self.pass_no == 0 and self.awaiting and self.baseline is not None:
            self.pass_no = 1  # the baseline alone, until its answers predict the rest
            self.order, self.queue, self.pinned = [self.baseline], [self.baseline], []
            return
        if self.pass_no > 0 or self.forecast is None:
            super()._open_pass()
            return
        self.pass_no = 1
        self._predicted_order()

    def _predicted_order(self) -> None:
        """Pass 1 from the forecast: the dominated out, the model, the pins, the rest by
        their optimistic prediction (rules 1 and 2)."""
        self._drop_dominated()
        self.model = self._fit()
        self.order = self._pins()
        self.queue = [x for x in self.order if not self.efforts[x].starts]
        self._reorder()

    def _arrives(self, forecast: Forecast | None, why: str | None = None) -> None:
        """The baseline's first bench is in: its forecast orders pass 1, or (none came:
        `why`) every config races as without one."""
        self.awaiting = False
        if forecast is None:
            self.fallback = why
            rest = [x for x in self.alive if not self.efforts[x].starts]
            self.order, self.queue = [*self.order, *rest], [*self.queue, *rest]
            return
        self.forecast = forecast
        self._predicted_order()

    def _part_arrives(self, label: str, forecast: Forecast | None) -> None:
        """A bench the forecast awaits is in: the baseline's (its answers) or a chain group's
        largest K (its counts). The anchors start next; once all are heard, pass 1 is
        ordered by what they said together."""
        if forecast is not None:
            self.partial = forecast if self.partial is None else merged(self.partial, forecast)
        self.heard.add(label)
        pending = [a for a in self.anchors if a not in self.heard and a in self.alive]
        if pending:
            fresh = [a for a in pending if a not in self.queue]
            self.order, self.queue = [*self.order, *fresh], [*self.queue, *fresh]
            return
        why = (
            "the benches it awaited recorded nothing to predict from (token paths, counts)"
            if self.anchors
            else "the baseline's bench recorded no token paths to predict from"
        )
        self._arrives(self.partial, None if self.partial else why)

    def _drop_dominated(self) -> None:
        assert self.forecast is not None
        gone = []
        for b in self.alive:
            better = None if b == self.baseline else dominator(self.forecast, b, self.alive)
            if better is not None:
                detail = f"dominated by {better}: as many tokens a round or more, a round as cheap"
                gone.append(Elimination(b, 1, "dominated", detail + " or cheaper (forecast)"))
        self._leave(gone)

    def _pins(self) -> list[str]:
        """The baseline; without probes, the fewest and the most verify tokens (rule 2)."""
        assert self.forecast is not None
        rest = [x for x in self.alive if x != self.baseline]
        head = [x for x in self.alive if x == self.baseline]
        known = [x for x in rest if x in self.forecast.shapes]
        if known and len(self.probes) < 2 and not self.probing:
            tokens = {x: most_verify_tokens(self.forecast, x) for x in known}
            ends = [min(known, key=tokens.__getitem__), max(known, key=tokens.__getitem__)]
            head += list(dict.fromkeys(ends))
        self.pinned = head
        return head + [x for x in rest if x not in head]

    def _probed(self, probes: Sequence[ForwardProbe]) -> None:
        """Forward costs measured on a running server (the baseline's): the cost's slope is
        measured, so the pins not started yet are no longer owed a start (rule 2)."""
        self.probes = tuple(probes)
        self.pinned = [x for x in self.pinned if self.efforts[x].starts or x == self.baseline]

    def _unprobed(self) -> None:
        """The baseline's forwards were not timed after all: the fewest and the most verify
        tokens are pinned first, as without probes (rule 2)."""
        self.probing = False
        if self.forecast is None:
            return  # (the forecast, when it comes, pins them)
        self._pins()  # the baseline and the two ends, now
        ends = [x for x in self.pinned if x in self.queue]
        self.queue = ends + [x for x in self.queue if x not in ends]

    def _reorder(self) -> None:
        """Pass 1's configs not started yet: the pins first, then by their optimistic
        prediction (rule 2); configs the forecast does not know race last."""
        if self.pass_no != 1 or self.model is None:
            return
        high = self._optimistic()
        rest = [x for x in self.queue if x not in self.pinned]
        rest.sort(key=lambda x: -high.get(x, 0.0))
        self.queue = [x for x in self.pinned if x in self.queue] + rest

    def _goes_on(self, step: Step, result: FinishedBench) -> bool:
        """A close call keeps its start (rule 5): a config the model puts within twice the
        tolerance of the best prediction gets every bench a start may hold, as a second
        start of it would cost more than the benches."""
        if super()._goes_on(step, result):
            return True
        if result.value is None or step.label not in self.alive:
            return False
        return step.bench < self.settings.most_benches and self._close_call(step.label)

    def _close_call(self, label: str) -> bool:
        if self.pass_no != 1 or self.model is None or self.forecast is None:
            return False
        known = [x for x in self.alive if x in self.forecast.shapes]
        if label not in known or label == self.baseline or len(known) < 2:
            return False
        mid = self._mid(known)
        best = max(mid.values())
        return mid[label] * (1 + 2 * self.settings.tolerance) >= best

    # --- after every start ---------------------------------------------------------

    def _record(self, step: Step, result: FinishedBench) -> None:
        super()._record(step, result)
        if result.probes and len(self.probes) < 2:
            self._probed(result.probes)
        elif self.probing and step.label == self.baseline and step.bench == 1:
            self._unprobed()
        if self.awaiting and (step.label == self.baseline or step.label in self.anchors):
            self._part_arrives(step.label, result.forecast)
        if result.unpredicted is not None:
            self.fall_back(f"{step.label}: {result.unpredicted}")
        start = self.efforts[step.label].starts
        if result.value is not None:
            per = self.tps.setdefault((step.label, start), {})
            for workload, value in result.tps:
                per.setdefault(workload, []).append(value)
        if step.bench == 1 and result.acceptance and self.forecast is not None:
            self._note_acceptance(step.label, dict(result.acceptance))

    def _refit(self, step: Step) -> None:
        """The check first (a leader it confirms eliminates at once), then the restart-bound
        rules, then the model refitted and rules 3 and 4."""
        if self.forecast is not None:
            self._recheck()
        super()._refit(step)
        if self.forecast is None:  # none given, or dropped (`fall_back`)
            return
        self.model = self._fit()
        self._prune()
        self._reorder()

    def _fit(self, without: str | None = None) -> CostModel:
        """The cost model over the measured starts (their seconds a round, from tok/s)."""
        assert self.forecast is not None
        shapes = self._shapes()
        observations = [
            Observation(label, w, shapes[label][w].tokens_per_round / geometric_mean(v), s)
            for (label, s), per in self.tps.items()
            if label != without and label in shapes
            for w, v in per.items()
            if w in shapes[label]
        ]
        start_sd = math.sqrt(self._components().start.var)  # the race's: its prior, then data
        return CostModel(shapes, observations, self.seed, self.probes, start_sd)

    def _shapes(self) -> dict[str, dict[str, Shape]]:
        """The forecast's shapes, each config's tokens a round corrected by what was measured
        (rule 4: its own measured ratio, else its group's, else the mean of every group)."""
        assert self.forecast is not None
        out = {}
        for label, by in self.forecast.shapes.items():
            factors, _ = self._correction(label)
            out[label] = {w: _scaled(s, factors.get(w, 1.0)) for w, s in by.items()}
        return out

    def _correction(self, label: str, without: str | None = None) -> tuple[dict[str, float], float]:
        """(workload -> factor on `label`'s predicted tokens a round beyond the bonus, the
        log-spread it may still be off): its own measured ratios; else its group's; else
        the mean over the groups measured, spread as they differ (one group: as far as it
        missed). `without`: as if that config had measured nothing (a check of it)."""
        assert self.forecast is not None
        if label in self.ratios and label != without:
            return self.ratios[label], 0.0
        by_group: dict[str, list[dict[str, float]]] = {}
        for x, r in self.ratios.items():
            if x != without:
                logs = {w: math.log(v) for w, v in r.items()}
                by_group.setdefault(self.forecast.group(x), []).append(logs)
        mine = by_group.get(self.forecast.group(label))
        if mine:
            return _exp_mean(mine), GROUP_SPREAD
        means = [_mean_logs(v) for v in by_group.values()]
        if not means:
            return {}, 0.0
        level = [sum(m.values()) / len(m) for m in means]  # each group's miss, one figure
        mean = sum(level) / len(level)
        if len(level) == 1:
            return _exp_mean(means), max(SPREAD_FLOOR, abs(mean))
        sd = math.sqrt(sum((m - mean) ** 2 for m in level) / (len(level) - 1))
        return _exp_mean(means), max(SPREAD_FLOOR, sd) * math.sqrt(1 + 1 / len(level))

    def _prune(self) -> None:
        """Configs not started that cannot beat the leader leave; configs left out earlier
        come back while they now could (rules 3 and 4). "Cannot": the optimistic point of
        their ratio to the leader, over the model's draws (both from one fit: what the fit
        leaves open moves both alike), with what their acceptance may still be off, is below 1."""
        leader = self._leader()
        if leader is None or self.model is None or self.forecast is None:
            return
        if any(not self.efforts[x].starts for x in self.pinned if x in self.alive):
            return  # the pins first: the cost's slope is still open
        measured = {_mode(self.forecast, x) for x, _ in self.tps}
        seen = {p for x, _ in self.tps for p in _drafter_positions(self.forecast, x)}
        high = {
            x: self._best_ratio(x, leader)
            for x in [*self.queue, *self.left_out]
            if x != self.baseline and not self.efforts[x].starts
            if x in self.forecast.shapes and _mode(self.forecast, x) in measured
            if len(seen) >= 2 or _drafter_positions(self.forecast, x) <= seen
        }  # a method not measured yet: what it adds to a round is still the prior's guess;
        # nor is what a drafter costs a position, until measured at two different numbers of
        # positions (at one, it is confounded with the method's own part of a round)
        self._admit([x for x in self.left_out if x in high and self._could_win(x, leader, high)])
        gone = [
            Elimination(x, self.pass_no, "predicted", self._out_words(x, leader, high[x]))
            for x in self.queue
            if x in high and not self._could_win(x, leader, high)
        ]
        self._leave(gone)
        self._drop(self._confirmed_worse(leader))

    def _confirmed_worse(self, leader: str) -> list[Elimination]:
        """Measured configs the model puts out of reach of a confirmed leader (rule 4): the
        model holds their own starts (each start's level its own effect), so one start
        each decides, as it pools every start; the baseline stays the reference the
        restart-bound rules judge."""
        if not self._spoke_for(leader):
            return []
        assert self.forecast is not None
        measured = [
            x
            for x in self.alive
            if x not in (leader, self.baseline) and x in self.forecast.shapes
            if self.efforts[x].starts  # not started: rule 3's to judge
        ]
        for x in measured:  # a cheaper one within the tolerance of the leader: the answer
            if self.forecast.cost(x) >= self.forecast.cost(leader) or not self._spoke_for(x):
                continue
            ratio = self._best_ratio(leader, x)
            if ratio < 1 + self.settings.tolerance:
                detail = self._out_words(leader, x, ratio) + f"; both measured, {x} as predicted"
                return [Elimination(leader, self.pass_no, "worse", detail)]
        out = []
        for x in measured:
            ratio = self._best_ratio(x, leader)
            if not self._could_win(x, leader, {x: ratio}):
                detail = (
                    self._out_words(x, leader, ratio) + f"; both measured, {leader} as predicted"
                )
                out.append(Elimination(x, self.pass_no, "worse", detail))
        return out

    def _could_win(self, label: str, leader: str, high: Mapping[str, float]) -> bool:
        assert self.forecast is not None
        cheaper = self.forecast.cost(label) < self.forecast.cost(leader)
        margin = 1 + self.settings.tolerance  # within it, the cheaper of two is the answer
        return high[label] * margin >= 1.0 if cheaper else high[label] >= margin

    def _best_ratio(self, label: str, leader: str) -> float:
        """The `PRUNE_LEVEL` upper point of `label`'s objective over the leader's."""
        assert self.model is not None and self.forecast is not None
        leader_draws = np.log(self.model.objective(leader, self.forecast.objective))
        return _upper(self._draws(label) - leader_draws)

    def _draws(self, label: str) -> np.ndarray:
        """Draws of `label`'s log objective: the cost model's, and what its acceptance
        correction may still be off (rule 4), drawn apart: a factor f on the tokens beyond
        the bonus moves log τ by (τ - 1) / τ · log f."""
        assert self.model is not None and self.forecast is not None
        draws = np.log(self.model.objective(label, self.forecast.objective))
        _, spread = self._correction(label)
        tau = self.forecast.acceptance.get(label) or 1.0
        sd = spread * (tau - 1) / tau
        if sd > 0:
            draws = draws + np.random.default_rng(self.seed).normal(0.0, sd, size=draws.shape)
        return draws

    def _mid(self, labels: Sequence[str]) -> dict[str, float]:
        """The cost model's median objective of each of `labels`."""
        assert self.model is not None and self.forecast is not None
        objective = self.forecast.objective
        return {x: float(np.median(self.model.objective(x, objective))) for x in labels}

    def _out_words(self, label: str, leader: str, ratio: float) -> str:
        words = (
            f"predicted at most {ratio:.1%} of {leader}'s objective ({PRUNE_LEVEL:.0%} bound "
            "of their ratio, from the cost model fitted to the starts so far)"
        )
        if ratio >= 1.0:
            words += f", within the tolerance and dearer than {leader}"
        return words

    def _leader(self) -> str | None:
        """The measured leader, where the model knows it: the best of the measured configs by
        the cost model's objective (its own τ, each start's level an effect of its own, so one
        lucky start does not make a leader); with one measured, the best mean of its starts."""
        assert self.forecast is not None
        measured = {x: g for x, g in self.groups.items() if x in self.alive and g}
        if not measured or self.components is None:
            return None
        known = [x for x in measured if x in self.forecast.shapes]
        if self.model is not None and len(known) >= 2:  # the model's level: a start's luck out
            return max(known, key=self._mid(known).__getitem__)
        means = {
            x: [sum(v for v, _ in start) / len(start) for start in g if start]
            for x, g in measured.items()
        }
        best = max(means, key=lambda x: sum(means[x]) / len(means[x]))
        return best if best in self.forecast.shapes else None

    def _optimistic(self) -> dict[str, float]:
        """The 97.5% point of each predicted config's objective, with what its correction
        may still be off (rule 4)."""
        assert self.model is not None and self.forecast is not None
        return {
            x: _upper(self._draws(x))
            for x in self.contenders
            if x in self.forecast.shapes and not self.efforts[x].starts
        }

    def _leave(self, gone: list[Elimination]) -> None:
        self._drop(gone)
        self.left_out += [e.label for e in gone if e.label not in self.left_out]

    def _admit(self, back: list[str]) -> None:
        """Configs predicted out come back to pass 1's queue (rule 4)."""
        for label in back:
            exit_ = self.eliminated.get(label)
            if exit_ is not None and exit_.reason == "predicted" and self.pass_no == 1:
                self._readmit(label)

    def _readmit(self, label: str) -> None:
        """`label`, left out, races again: back in the race, last in this pass."""
        del self.eliminated[label]
        self.alive.append(label)
        self.queue.append(label)
        self.order.append(label)

    # --- the baseline from an earlier sweep (rule 6) ----------------------------------

    def _reuse(self) -> None:
        """The baseline's start in an earlier sweep of this service and bench is its first
        here: its level, its answers and its timed forwards are in before pass 1 starts
        anything, on this sweep's clock (its hours negative, so the drift between the two
        sweeps stays in the model); it costs this sweep neither time nor a trial."""
        step = None
        for result in self.earlier:
            step = Step(result.label, 1, result.bench, self.pass_no)
            self._record(step, dataclasses.replace(result, seconds=0.0))
        assert step is not None
        self.trials_done = 0
        self._refit(step)
        self._settle()

    def _owed(self) -> bool:
        """Does the baseline still owe a start of its own (rule 6)? The sweep's report and
        its restore measure the service as it is now, not as an earlier sweep found it."""
        baseline = self.baseline
        return bool(self.earlier) and baseline is not None and self.efforts[baseline].starts < 2

    def _drop(self, removed: Sequence[Elimination]) -> None:
        """No verdict on the baseline from an earlier sweep's start alone (rule 6)."""
        owed = self._owed()
        super()._drop([e for e in removed if not (owed and e.label == self.baseline)])

    def _settle(self) -> None:
        """While the baseline owes its own start, it is next once the pass has nothing else
        to start, and the race does not stop before it (past `max_trials` or `max_hours` too:
        the report compares with it); then it judges again (rule 6)."""
        owed = self._owed()
        if owed and not self.queue:
            assert self.baseline is not None
            self.queue.append(self.baseline)
        super()._settle()
        if self.stop is not None and owed:
            assert self.baseline is not None
            self.stop = None
            if self.baseline not in self.queue:
                self.queue.append(self.baseline)

    # --- the check (rule 4) ----------------------------------------------------------

    def _confirmed(self, leader: str) -> bool:
        """A leader the forecast spoke for needs no second start (rule 4); the start variance
        stays in every test it makes."""
        return self._spoke_for(leader) or super()._confirmed(leader)

    def _spoke_for(self, label: str) -> bool:
        """Did the forecast speak for `label` (rule 4)? Measured as predicted, each check made
        without it (`_recheck`), or (the first of its method, whose level only it measured)
        its acceptance as predicted."""
        if self.forecast is None:
            return False
        if label in self.confirmed:
            return True
        words = self._acceptance_words(label)
        return words is not None and "apart" not in words and label not in self.missed

    def _note_acceptance(self, label: str, measured: dict[str, float]) -> None:
        """Its first start's acceptance per workload, as ratios to the forecast's (beyond
        the bonus token)."""
        assert self.forecast is not None
        predicted = _predicted_tau(self.forecast, label)
        both = [w for w in measured if w in predicted]
        if both and label not in self.ratios:
            self.accepted[label] = {w: measured[w] for w in both}
            self.ratios[label] = {
                w: max(measured[w] - 1, 1e-6) / max(predicted[w] - 1, 1e-6) for w in both
            }

    def _recheck(self) -> None:
        """Rule 4 over every measured config, each against a prediction made without it
        (its acceptance against the corrections of the others, its objective against the
        model fitted to the others' starts, with its own measured τ): `confirmed` holds
        those whose objective came out as predicted; `missed` keeps each config's first
        miss (its acceptance too) for the report."""
        assert self.forecast is not None
        self.confirmed = set()
        for label in {x for x, _ in self.tps if x in self.forecast.shapes}:
            words = [self._acceptance_words(label), self._objective_words(label)]
            found = [w for w in words if w is not None]
            misses = [w for w in found if w.endswith(")") and "apart" in w or "outside" in w]
            self.checked[label] = "; ".join(found)
            if misses:
                self.missed.setdefault(label, "; ".join(misses))
            objective = words[1]  # None: the first of its method, its level the prior's guess
            if objective is not None and "outside" not in objective:
                self.confirmed.add(label)  # its round cost as predicted (its τ: its own now)

    def _acceptance_words(self, label: str) -> str | None:
        """Its acceptance per workload against the forecast's, corrected by the others'
        misses; a miss: the worst workload further off than `TAU_TOLERANCE` and what the
        others' corrections leave open."""
        assert self.forecast is not None
        predicted, measured = _predicted_tau(self.forecast, label), self.accepted.get(label)
        if not measured:
            return None
        factors, spread = self._correction(label, without=label)
        expected = {w: 1 + (predicted[w] - 1) * factors.get(w, 1.0) for w in measured}
        miss = max(abs(measured[w] / expected[w] - 1) for w in measured)
        allowed = (1 + TAU_TOLERANCE) * math.exp(Z_PRUNE * spread) - 1
        pairs = ", ".join(f"{w} {measured[w]:.3f} ({expected[w]:.3f})" for w in measured)
        words = f"acceptance {pairs} measured (predicted)"
        if miss > allowed:
            words += f" ({miss:.1%} apart, more than {allowed:.0%})"
        return words

    def _objective_words(self, label: str) -> str | None:
        """The measured objective against what the model fitted without it predicts
        (`CHECK_LEVEL`, a start's own noise included), from the second config of a method on
        (before that, the prediction is the prior's) and once that interval is narrow enough
        to check anything (`CHECK_SPAN`)."""
        assert self.forecast is not None
        logs = [v for start in self.groups.get(label, []) for v, _ in start]
        mode = _mode(self.forecast, label)
        others = {x for x, _ in self.tps if x != label and _mode(self.forecast, x) == mode}
        if not logs or not others:
            return None
        model = self._fit(without=label)
        draws = np.log(model.objective(label, self.forecast.objective))
        sd = model.noise_sd()
        noisy = draws + np.random.default_rng(self.seed).normal(0.0, sd, size=draws.shape)
        tail = (1 - CHECK_LEVEL) / 2 * 100
        low, high = np.exp(np.percentile(noisy, [tail, 100 - tail]))
        if high / low > CHECK_SPAN:
            return None  # the others leave it open (e.g. the slope before the pins): no check
        measured = math.exp(sum(logs) / len(logs))
        words = f"objective {measured:.3g} measured, [{low:.3g}, {high:.3g}] predicted"
        if not low <= measured <= high:
            words += f" (outside the {CHECK_LEVEL:.0%} interval)"
        return words

    def fall_back(self, why: str) -> None:
        """The forecast speaks for other models than the service serves (the weights at
        READY are not the traced ones): nothing it said holds, so every config it left out
        races as without it, and no leader is confirmed by it."""
        if self.fallback is not None:
            return
        self.fallback = why
        self.forecast = None
        for label in [x for x in self.left_out if x in self.eliminated]:
            self._readmit(label)
        self.checked.clear()
        self.confirmed.clear()

    # --- what the report shows ---------------------------------------------------------

    def predictions(self) -> list[PredictedConfig]:
        """Per config: its predicted τ and objective (the model as it stands), what became of
        it, its check."""
        if self.forecast is None:
            return []
        statuses = {}
        for label in [x for x in self.contenders if x in self.forecast.shapes]:
            exit_ = self.eliminated.get(label)
            started = "started" if self.efforts[label].starts else "not started"
            statuses[label] = LEFT_OUT.get(exit_.reason if exit_ is not None else "", started)
        model = self.model or self._fit()
        return predicted_configs(self.forecast, model, statuses, self.checked, self.seed)


def predicted_configs(
    forecast: Forecast,
    model: CostModel,
    statuses: dict[str, str],
    checked: dict[str, str] | None = None,
    seed: int = 0,
) -> list[PredictedConfig]:
    """The report's rows: each config's predicted τ and what one start of it would measure
    (the model's draws with a start's own spread: median and 95%)."""
    rng = np.random.default_rng(seed)
    out = []
    for label, status in statuses.items():
        logs = np.log(model.objective(label, forecast.objective))
        noisy = np.exp(logs + rng.normal(0.0, model.noise_sd(), size=logs.shape))
        mid, low, high = (float(v) for v in np.percentile(noisy, [50.0, 2.5, 97.5]))
        check = (checked or {}).get(label)
        out.append(
            PredictedConfig(label, forecast.acceptance.get(label), (mid, low, high), status, check)
        )
    return out


def dominator(forecast: Forecast, label: str, labels: Iterable[str]) -> str | None:
    """The first of `labels` whose rounds dominate `label`'s (rule 1: as many tokens a round
    or more, a round as cheap or cheaper); None where none does or the forecast knows no
    rounds of `label`."""
    if label not in forecast.shapes:
        return None
    known = (x for x in labels if x in forecast.shapes)
    return next((x for x in known if forecast.dominates(x, label)), None)


def most_verify_tokens(forecast: Forecast, label: str) -> float:
    """The most tokens one of `label`'s rounds verifies, over the workloads."""
    return max(shape.verify_tokens for shape in forecast.shapes[label].values())


def _scaled(shape: Shape, factor: float) -> Shape:
    """`shape` committing `factor` times its tokens a round beyond the bonus token."""
    if factor == 1.0 or shape.mode == "ar":
        return shape
    tokens = 1 + (shape.tokens_per_round - 1) * factor
    acceptance = None if shape.acceptance is None else 1 + (shape.acceptance - 1) * factor
    return dataclasses.replace(shape, tokens_per_round=tokens, acceptance=acceptance)


def _predicted_tau(forecast: Forecast, label: str) -> dict[str, float]:
    """The forecast's τ per workload (as the service counts it)."""
    shapes = forecast.shapes.get(label, {})
    return {w: s.acceptance for w, s in shapes.items() if s.acceptance is not None}


def _mean_logs(rows: list[dict[str, float]]) -> dict[str, float]:
    """Per workload, the mean of the logs the rows hold for it."""
    workloads = {w for row in rows for w in row}
    return {w: sum(vals) / len(vals) for w in workloads if (vals := [r[w] for r in rows if w in r])}


def _exp_mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {w: math.exp(v) for w, v in _mean_logs(rows).items()}


def _upper(logs: np.ndarray) -> float:
    """The `PRUNE_LEVEL` upper point of draws of a log."""
    return math.exp(float(np.percentile(logs, 100 * (1 - (1 - PRUNE_LEVEL) / 2))))


def _drafter_positions(forecast: Forecast, label: str) -> set[float]:
    """The numbers of context positions `label`'s drafter attends, one per workload (its
    share of the context where the forecast knows no positions); none without a drafter."""
    shapes = forecast.shapes.get(label, {}).values()
    return {round(s.drafter_positions or s.drafter_share, 6) for s in shapes} - {0.0}


def _mode(forecast: Forecast, label: str) -> str | None:
    shapes = forecast.shapes.get(label)
    return next(iter(shapes.values())).mode if shapes else None


__all__ = [
    "CHECK_LEVEL",
    "PRUNE_LEVEL",
    "TAU_TOLERANCE",
    "PredictRace",
    "dominator",
    "most_verify_tokens",
    "predicted_configs",
]
