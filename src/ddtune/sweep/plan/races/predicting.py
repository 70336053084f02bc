"""A predicting race: a trace decides which configs are worth a start, a restart-bound race confirms.

`[sweep] strategy = "predict"`. A trace (`ddtune.trace`) fixes every config's
rounds at T = 0; what a round costs is fitted as trials come in
(`ddtune.trace.round_cost.CostModel`). `PredictRace` is a `StartRace` (every rule of
`starts.py` holds for the configs it starts) with four more, all a pure fold of
the finished benches, so a resumed race decides as the uninterrupted one:

1. Dominated (before anything runs): a round never costs less with more verify
   tokens or a wider drafter window, so a config whose rounds commit no more
   tokens than another's on every workload, at no fewer verify tokens and no
   narrower window, can never be faster: it leaves (`dominated`), never started.
2. Pass 1 order: the baseline, then the configs with the fewest and the most
   verify tokens (they pin the cost's slope), then always the config whose
   predicted objective could be highest (the 99.5% point of its draws).
3. After every start (once the pins ran) the cost model is refitted; a config not started yet leaves
   (`predicted`) when even its optimistic prediction is below the leader's
   measured level (a config cheaper than the leader: below it by more than the
   tolerance): `PRUNE_LEVEL`.
4. The check: each started config's measured acceptance against the trace's
   (within `TAU_TOLERANCE`), and its measured objective against what the model
   fitted without it predicts (`CHECK_LEVEL`, the noise of a start included). A
   miss means the trace or the model is wrong for this service: every config
   the prediction left out comes back and the race goes on as a plain
   restart-bound race (`fallback` says why). The trace never silently decides.

See docs/sweeps.md "Predict, then confirm".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ddtune.records import Elimination, PredictedConfig
from ddtune.sweep.plan.races.by_start import FinishedBench, StartRace, Step
from ddtune.trace.forecast import Forecast
from ddtune.trace.round_cost import CostModel, Observation

PRUNE_LEVEL = 0.95  # a config is out when its 97.5% point is below the leader's level
CHECK_LEVEL = 0.99  # a measurement outside the 99% prediction interval is a miss
TAU_TOLERANCE = 0.05  # measured acceptance this far from the trace's is a miss
Z = 0.0  # the leader's level: its measured mean less Z standard errors


@dataclass
class PredictRace(StartRace):
    forecast: Forecast | None = None
    fallback: str | None = None  # why every config races now (rule 4), once it happened
    left_out: list[str] = field(default_factory=list)  # dominated or predicted out, in order
    tps: dict[tuple[str, int], dict[str, list[float]]] = field(default_factory=dict)
    model: CostModel | None = None
    checked: dict[str, str] = field(default_factory=dict)  # label -> its check, in words
    pinned: list[str] = field(default_factory=list)  # pass 1's first starts (rule 2)

    # --- pass 1: who is worth a start ------------------------------------------------

    def _open_pass(self) -> None:
        if self.pass_no > 0 or self.forecast is None:
            super()._open_pass()
            return
        self.pass_no = 1
        self._drop_dominated()
        self.model = self._fit()
        self.order = self._pins()
        self.queue = list(self.order)
        self._reorder()

    def _drop_dominated(self) -> None:
        assert self.forecast is not None
        gone = []
        for b in self.alive:
            if b == self.baseline:
                continue
            better = next((a for a in self.alive if self.forecast.dominates(a, b)), None)
            if better is not None:
                detail = f"dominated by {better}: as many tokens a round or more, a round as cheap"
                gone.append(Elimination(b, 1, "dominated", detail + " or cheaper (trace)"))
        self._leave(gone)

    def _pins(self) -> list[str]:
        """The baseline, then the fewest and the most verify tokens (rule 2)."""
        assert self.forecast is not None
        shapes = self.forecast.shapes
        rest = [x for x in self.alive if x != self.baseline]
        head = [self.baseline] if self.baseline in self.alive else []
        if rest:
            tokens = {x: max(s.verify_tokens for s in shapes[x].values()) for x in rest}
            ends = [min(rest, key=tokens.__getitem__), max(rest, key=tokens.__getitem__)]
            head += list(dict.fromkeys(ends))
        self.pinned = [x for x in head if x is not None]
        return self.pinned + [x for x in rest if x not in head]

    def _reorder(self) -> None:
        """Pass 1's configs not started yet: the pins first, then by their optimistic
        prediction (rule 2)."""
        if self.pass_no != 1 or self.model is None:
            return
        high = self._optimistic()
        rest = sorted((x for x in self.queue if x not in self.pinned), key=lambda x: -high[x])
        self.queue = [x for x in self.pinned if x in self.queue] + rest

    # --- after every start ---------------------------------------------------------

    def _record(self, step: Step, result: FinishedBench) -> None:
        super()._record(step, result)
        if result.unpredicted is not None:
            self.fall_back(f"{step.label}: {result.unpredicted}")
        start = self.efforts[step.label].starts
        if result.value is not None:
            per = self.tps.setdefault((step.label, start), {})
            for workload, value in result.tps:
                per.setdefault(workload, []).append(value)
        if step.bench == 1 and result.acceptance is not None:
            self._check_acceptance(step.label, result.acceptance)

    def _refit(self, step: Step) -> None:
        super()._refit(step)
        if self.forecast is None:
            return
        self.model = self._fit()
        if self.fallback is None and self.efforts[step.label].starts == 1:
            self._check_objective(step.label)
        if self.fallback is None:
            self._prune()
        self._reorder()

    def _fit(self, without: str | None = None) -> CostModel:
        assert self.forecast is not None
        observations = [
            Observation(label, w, self.forecast.shapes[label][w].tokens_per_round / _geo(v), s)
            for (label, s), per in self.tps.items()
            if label != without
            for w, v in per.items()
            if w in self.forecast.shapes[label]
        ]
        return CostModel(self.forecast.shapes, observations, self.seed)

    def _prune(self) -> None:
        """Configs not started whose best case cannot beat the leader (rule 3)."""
        level = self._leader_level()
        if level is None or self.model is None or self.forecast is None:
            return
        if any(not self.efforts[x].starts for x in self.pinned if x in self.alive):
            return  # the pins first: the cost's slope is still open
        leader, low = level
        high = self._optimistic()
        gone = []
        for label in self.queue:
            if label == self.baseline or self.efforts[label].starts:
                continue
            cheaper = self.forecast.cost(label) < self.forecast.cost(leader)
            margin = 1 + self.settings.tolerance if cheaper else 1.0
            if high[label] * margin < low:
                detail = (
                    f"predicted at most {high[label]:.3g} ({PRUNE_LEVEL:.0%} bound), below "
                    f"the measured level of {leader} ({low:.3g})"
                )
                gone.append(Elimination(label, self.pass_no, "predicted", detail))
        self._leave(gone)

    def _optimistic(self) -> dict[str, float]:
        assert self.model is not None and self.forecast is not None
        q = 100 * (1 - (1 - PRUNE_LEVEL) / 2)
        return {
            x: float(np.percentile(self.model.objective(x, self.forecast.objective), q))
            for x in self.alive
        }

    def _leader_level(self) -> tuple[str, float] | None:
        """(the measured leader, a lower bound of its level in the objective's units)."""
        measured = {x: g for x, g in self.groups.items() if x in self.alive and g}
        if not measured or self.components is None:
            return None
        means = {
            x: [sum(v for v, _ in start) / len(start) for start in g if start]
            for x, g in measured.items()
        }
        leader = max(means, key=lambda x: sum(means[x]) / len(means[x]))
        c = self.components
        n = sum(len(s) for s in measured[leader]) / len(means[leader])
        se = math.sqrt((c.start.var + c.bench.var / n) / len(means[leader]))
        return leader, math.exp(sum(means[leader]) / len(means[leader]) - Z * se)

    def _leave(self, gone: list[Elimination]) -> None:
        self._drop(gone)
        self.left_out += [e.label for e in gone]

    # --- the check (rule 4) ----------------------------------------------------------

    def _check_acceptance(self, label: str, measured: float) -> None:
        assert self.forecast is not None
        predicted = self.forecast.acceptance.get(label)
        if predicted is None or self.fallback is not None:
            return
        miss = abs(measured / predicted - 1)
        words = f"acceptance {measured:.3f} measured, {predicted:.3f} predicted"
        self.checked[label] = words
        if miss > TAU_TOLERANCE:
            self.fall_back(f"{label}: {words} ({miss:.1%} apart, more than {TAU_TOLERANCE:.0%})")

    def _check_objective(self, label: str) -> None:
        """The config's measured objective against the model fitted without it."""
        assert self.forecast is not None
        logs = [v for start in self.groups.get(label, []) for v, _ in start]
        others = {x for x, _ in self.tps if x != label}
        if not logs or not others:
            return
        model = self._fit(without=label)
        draws = np.log(model.objective(label, self.forecast.objective))
        sd = model.noise_sd()
        noisy = draws + np.random.default_rng(self.seed).normal(0.0, sd, size=draws.shape)
        tail = (1 - CHECK_LEVEL) / 2 * 100
        low, high = np.exp(np.percentile(noisy, [tail, 100 - tail]))
        measured = math.exp(sum(logs) / len(logs))
        words = f"objective {measured:.3g} measured, [{low:.3g}, {high:.3g}] predicted"
        self.checked[label] = "; ".join(filter(None, [self.checked.get(label), words]))
        if not low <= measured <= high:
            self.fall_back(f"{label}: {words} (outside the {CHECK_LEVEL:.0%} interval)")

    def fall_back(self, why: str) -> None:
        """Rule 4: what the prediction left out races too (also when the planner finds the
        service's models are not the traced ones)."""
        if self.fallback is not None:
            return
        self.fallback = why
        back = [x for x in self.left_out if x in self.eliminated]
        for label in back:
            del self.eliminated[label]
            self.alive.append(label)
            self.queue.append(label)
            self.order.append(label)

    # --- what the report shows ---------------------------------------------------------

    def predictions(self) -> list[PredictedConfig]:
        """Per config: its predicted τ and objective (the model as it stands), what became of
        it, its check."""
        if self.forecast is None:
            return []
        statuses = {}
        for label in self.contenders:
            exit_ = self.eliminated.get(label)
            statuses[label] = "started" if self.efforts[label].starts else "not started"
            if exit_ is not None and exit_.reason in ("dominated", "predicted"):
                statuses[label] = "dominated" if exit_.reason == "dominated" else "predicted out"
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


def _geo(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


__all__ = ["CHECK_LEVEL", "PRUNE_LEVEL", "TAU_TOLERANCE", "PredictRace", "predicted_configs"]
