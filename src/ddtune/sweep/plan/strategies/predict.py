"""Strategy "predict": every config's speed at T = 0 predicted, then confirmed by a few starts.

What predicts: a trace (`[sweep] trace`) for trees and chains of ddtune's engine;
for n-gram (prompt lookup) no trace at all: the baseline's own T = 0 answers (its
token ids, `[bench] token_paths`) fix every n-gram config's rounds exactly, so the
forecast arrives with the baseline's first bench. That bench also times forwards
over n tokens on the running baseline (`[bench] forward_probes`): what a round's
verify costs, without a restart. A restart-bound race then starts only configs the
forecast says could still win (`races/predicting.py`). Above T = 0 nothing is
predicted: the sweep races as strategy "race" does (restart-bound or not, by the
same rule) and the report says why."""

from __future__ import annotations

import dataclasses
import time

from ddtune.bench.matrix import BenchMatrix
from ddtune.engines import get_engine
from ddtune.methods import needs_trace
from ddtune.records import SweepContext, TrialRecord
from ddtune.sweep.plan.costs import TrialCosts
from ddtune.sweep.plan.passes import objective_value
from ddtune.sweep.plan.predictions import spec_forecast, stored_forecast
from ddtune.sweep.plan.races.by_start import FinishedBench, StartRace
from ddtune.sweep.plan.races.predicting import PredictRace
from ddtune.sweep.plan.reuse import EarlierStart, earlier_start
from ddtune.sweep.plan.strategies.base import Strategy, in_passes
from ddtune.sweep.plan.strategies.predict_path import outputs_words, probes_forward
from ddtune.sweep.plan.strategies.race import Race
from ddtune.sweep.plan.strategies.restart_bound import RestartBoundRace, contenders_of
from ddtune.sweep.spec.checks import fail
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.spec.schema import SpecDocument
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.modes import SweepMode
from ddtune.sweep.store.rows import SweepRow, TrialRow
from ddtune.trace.chains import ChainCounts
from ddtune.trace.chains.forecast import ChainRun, chain_anchors, chains_forecast
from ddtune.trace.forecast import Forecast, identity_mismatch, paths_forecast
from ddtune.trace.round_cost import WORKLOADS, ForwardProbe

ABOVE_T0 = (
    "A trace predicts T = 0 only; the bench ran at T = {}, so every config raced as in a "
    "restart-bound race."
)


PROBE_TOKENS = (1, 2, 4, 8, 16, 32, 64)  # forwards timed on the running baseline


class Predict(Race):
    name = "predict"

    @classmethod
    def check(cls, doc: SpecDocument) -> None:
        """Something to predict from; restart-bound: starts reused in this process."""
        Strategy.check(doc)  # search settings refused, restart_bound not pinned
        in_passes(doc, cls.name, cls.repeats(doc.sweep))
        sweep = doc.sweep
        if sweep.trace is None:
            _check_outputs_predict(doc)
        if doc.cluster.backend != "local":
            fail(
                "sweep.strategy",
                '"predict" reuses a start in this process: use cluster.backend local',
            )
        if sweep.interleave == "request":
            fail(
                "sweep.interleave",
                '"request" shares one hot server among a pass\'s configs; strategy = "predict" '
                "decides start by start: remove interleave",
            )

    @classmethod
    def choose_mode(cls, spec: SweepSpec, costs: TrialCosts | None) -> SweepMode:
        """Restart-bound, with the trace's forecast fixed with the new sweep (at T = 0); without
        a trace, the forecast comes from the baseline's first bench."""
        if spec.bench.temperature != 0:
            return super().choose_mode(spec, costs)
        start_s, bench_s = (costs.start_s, costs.bench_s) if costs is not None else (None, None)
        chains = chain_anchors(spec.params_by_label())
        source = (
            "the trace"
            if spec.trace is not None
            else "the largest num_steps's counts per draft position"
            if chains
            else "the baseline's T = 0 answers"
        )
        why = f"strategy predict: which configs start is chosen from {source}, a restart-bound race confirms"
        forecast = None if spec.trace is None else spec_forecast(spec).to_json()
        most = spec.restart_bound.most_benches
        return SweepMode(True, why, start_s, bench_s, most, forecast=forecast)

    @classmethod
    def runs_as(cls, spec: SweepSpec, mode: SweepMode) -> type[Strategy]:
        if spec.bench.temperature != 0:
            return RacingUnpredicted if mode.restart_bound else RaceUnpredicted
        return PredictingRace if mode.restart_bound else cls


class PredictingRace(RestartBoundRace):
    """The restart-bound race of a predicting sweep: the forecast kept with the sweep, or (no
    trace) built from the baseline's first bench as it is folded in."""

    name = "predicting race"
    later = (
        "; a predicting race plans one bench at a time from the results: the baseline first (its "
        "timed forwards fix what a verify costs), then only configs the forecast says could "
        "still win (the dominated ones never), to confirm"
    )

    def __init__(self, spec: SweepSpec, mode: SweepMode) -> None:
        self.forecast = None if spec.trace is None else stored_forecast(spec, mode)
        self.from_outputs = self.forecast is None  # the baseline's answers will predict
        self.params = spec.params_by_label()
        # ... with each chain group's largest K (its counts predict the smaller ones)
        self.anchors = chain_anchors(self.params) if self.from_outputs else {}
        # the baseline's start in an earlier sweep of this service and bench, fixed at creation
        self.earlier = None if mode.reused is None else EarlierStart.from_json(mode.reused)
        self.created: float | None = None  # the sweep's creation (its clock), once it has one
        super().__init__(spec, mode)

    @classmethod
    def fixed_at_creation(cls, spec: SweepSpec, mode: SweepMode, store: Store) -> SweepMode:
        """The baseline's latest start in an earlier sweep of the store that measured it as
        this one does (`plan/reuse.py`), kept with the new sweep's mode."""
        if spec.baseline is None or spec.bench.temperature != 0:
            return mode
        probing = probes_forward(spec)

        def serves(record: TrialRecord) -> bool:  # what the baseline's first bench measures
            paths = spec.trace is not None or bool(record.token_paths)
            return not probing or (bool(record.forward_probes) and paths)

        earlier = earlier_start(
            store,
            spec,
            spec.baseline.label(),
            serves,
            lambda record: objective_value(record, spec.objective),
        )
        return mode if earlier is None else dataclasses.replace(mode, reused=earlier.to_json())

    def state(self, store: Store | None = None, sweep_id: int | None = None) -> StartRace:
        """As a restart-bound race's, on the sweep's own clock (the earlier start's benches
        hours before it)."""
        if store is not None and sweep_id is not None and self.created is None:
            names = dict(zip(store.sweep_ids(), store.sweep_names(), strict=True))
            self.created, self._finished = store.sweep_row(names[sweep_id])["created_at"], None
        return super().state(store, sweep_id)

    def outcome(self) -> str:
        words = super().outcome()
        if self.earlier is None:
            return words
        return f"{words}; and the baseline's start in sweep {self.earlier.sweep} (reused)"

    def efforts(self) -> dict[str, tuple[int, int]]:
        """This sweep's own starts and benches: the earlier start's are not its."""
        efforts, earlier = super().efforts(), self.earlier
        if earlier is None:
            return efforts
        baseline, reused = self.state().baseline, len(earlier.benches)
        own = {x: (s - 1, b - reused) if x == baseline else (s, b) for x, (s, b) in efforts.items()}
        return {x: effort for x, effort in own.items() if effort[0]}

    def _new_race(self) -> StartRace:
        earlier = () if self.earlier is None else self.earlier.benches
        since = time.time() if self.created is None else self.created
        hours = () if self.earlier is None else self.earlier.hours(since)
        return PredictRace(
            *contenders_of(self.configs),
            self.settings,
            self.spec.seed,
            forecast=self.forecast,
            awaiting=self.forecast is None,
            anchors=tuple(dict.fromkeys(self.anchors.values())),
            probing=probes_forward(self.spec),
            earlier=tuple(
                dataclasses.replace(
                    self._result(record, h, n == 1, 0.0), start=1, bench=n, fresh=n == 1
                )
                for n, ((record, _), h) in enumerate(zip(earlier, hours, strict=True), start=1)
            ),
        )

    def bench_for(self, trial: TrialRow, matrix: BenchMatrix) -> BenchMatrix:
        """The baseline's first bench (of its first start in this sweep, where an earlier one's
        was reused: a later sweep then reuses this fresher one) also measures what the
        forecast reads: its token paths (no trace) and the forwards it times
        (`bench/forecast_inputs.py`)."""
        first = 1 if self.earlier is None else self.settings.most_benches + 1
        if not trial["is_baseline"] or trial["repeat"] != first or not probes_forward(self.spec):
            return matrix
        update = {"forward_probes": PROBE_TOKENS, "token_paths": self.forecast is None}
        return matrix.model_copy(update=update)

    def _result(
        self, record: TrialRecord, hours: float, fresh: bool, seconds: float
    ) -> FinishedBench:
        """With the tok/s per workload, τ and whether the trace speaks for its weights."""
        result = super()._result(record, hours, fresh, seconds)
        if record.status != "done":
            return result
        tps = tuple((w, v) for w, v in _per_workload(record, "tps") if v > 0)
        tau = _per_workload(record, "acceptance_length")
        identity = record.conditions.get("server_identity") or {}
        forecast = self.forecast
        if forecast is None and record.token_paths:  # the baseline's answers predict
            forecast = paths_forecast(record.token_paths, self.params, self.spec.objective)
        elif forecast is None and self.anchors.get(record.label) == record.label:
            forecast = self._chains(record, dict(tau))
        probes = tuple(ForwardProbe(p["tokens"], p["seconds"]) for p in record.forward_probes or ())
        return dataclasses.replace(
            result,
            tps=tps,
            acceptance=tau,
            unpredicted=None if forecast is None else identity_mismatch(forecast, identity),
            probes=probes,
            forecast=forecast if self.forecast is None else None,
        )

    def _chains(self, record: TrialRecord, tau: dict[str, float]) -> Forecast | None:
        """A chain group's largest K: its counts predict the group (None: not counted)."""
        counts = record.draft_counts
        if not counts or record.repeat != 1 or not tau:
            return None
        by = {w: _counts(c) for w, c in (counts.get("workloads") or {}).items() if c.get("drafts")}
        run = ChainRun(_counts(counts), tau, by)
        return chains_forecast(self.params, {record.label: run}, self.spec.objective)

    def pass_words(self) -> list[str]:
        """`sweep plan`: who starts, in the user's words (`RestartBoundRace.how_it_runs`)."""
        source = (
            "the trace fixes every config's acceptance"
            if self.forecast is not None
            else outputs_words(self.spec)
        )
        pins = (
            "its first bench also times forwards over 1 to 64 tokens on the running server "
            "(what a round's verify costs, without a restart), then"
            if probes_forward(self.spec)
            else "then the configs with the fewest and the most verify tokens (they fix what "
            "a round costs), then"
        )
        return [
            f"Predict, then confirm (T = 0): {source}; what a round costs is learned from the "
            "starts. A config another one dominates (as many tokens a round or more on every "
            "workload, a round as cheap or cheaper) never starts.",
            f"Pass 1 starts the baseline; {pins} always the config that could be the fastest "
            "by the prediction; a config that cannot beat the measured leader (by more than "
            "the tolerance, when it is dearer) never starts.",
            "A miss corrects the predictions and costs a start or two, never a full race. "
            "Later passes start again only the close contenders.",
        ]

    def leave_words(self) -> str:
        return (
            "A leader measured as predicted makes others leave after one start (the model "
            "holds every start); any other leader only once seen on 2 starts or more."
        )

    def context(self, store: Store, sweep: SweepRow) -> SweepContext:
        context = super().context(store, sweep)
        race = self.state()
        if self.earlier is not None:
            when = self.earlier.words(sweep["created_at"])
            context.notes.append(
                f"The baseline ({race.baseline}) was not started first: {when} "
                "measured it as this sweep does (the same service and bench), so it counted as "
                "the baseline's first start here; it started again only as the race needed it."
            )
        if isinstance(race, PredictRace):
            context.predictions, context.fallback = race.predictions(), race.fallback
            if self.forecast is not None:
                context.predicted_from = f"the trace {self.forecast.source}"
            elif race.forecast is not None:  # the baseline's answers (and chains' counts)
                context.predicted_from = race.forecast.source
            else:
                context.predicted_from = "the baseline's T = 0 answers"
            context.notes.append(_predicted_words(race))
        return context


class _AboveT0(Strategy):
    """Strategy predict above T = 0: a race, and the report says why."""

    def context(self, store: Store, sweep: SweepRow) -> SweepContext:
        context = super().context(store, sweep)
        context.notes.append(ABOVE_T0.format(self.spec.bench.temperature))
        return context


class RaceUnpredicted(_AboveT0, Race):
    """Strategy predict above T = 0, pass by pass."""

    name = "predict"


class RacingUnpredicted(_AboveT0, RestartBoundRace):
    """Strategy predict above T = 0, restart-bound."""


def _per_workload(record: TrialRecord, name: str) -> tuple[tuple[str, float], ...]:
    """(workload, value) of each workload's metric `name` that the record holds as a number."""
    return tuple(
        (w, float(v))
        for w in WORKLOADS
        if isinstance(v := record.metrics.get(f"{w}_{name}"), int | float)
    )


def _counts(stored: dict) -> ChainCounts:
    """A bench's stored `draft_counts` (its run's, or one workload's) as chain counts."""
    return ChainCounts(int(stored["drafts"]), tuple(stored["accepted_per_position"]))


def _check_outputs_predict(doc: SpecDocument) -> None:
    """Without a trace, only methods the baseline's own answers predict (n-gram), at T = 0, on
    an engine that answers with token ids."""
    engine = get_engine(str(doc.service.get("engine") or doc.service.get("kind") or "ddtune"))
    traced = needs_trace(_methods(doc), engine.counts_drafts)
    if traced:
        fail(
            "sweep.trace",
            f'is required by strategy = "predict" for {", ".join(traced)}: the trace folder to '
            "predict from (record it with `ddtune trace record --spec SPEC --out DIR`); n-gram "
            "needs none (the baseline's answers predict it), nor do chains (EAGLE, EAGLE-3, "
            "MTP) on vLLM (the largest K's counts predict the rest)",
        )
    if not engine.returns_token_ids:
        fail(
            "sweep.strategy",
            f'"predict" without a trace reads the baseline\'s answers as token ids, which the '
            f"{engine.name} engine does not send: record a trace (`[sweep] trace`) or use "
            'strategy = "race"',
        )


def _methods(doc: SpecDocument) -> set[str]:
    """Every method the spec's configs run (a mode where no method is named)."""
    tables = [*doc.configs, *([doc.sweep.baseline] if doc.sweep.baseline else [])]
    found = {str(t.method or t.mode or "ddtree") for t in tables}
    if doc.space is not None:  # a space naming no method sweeps DDTree's knobs
        found |= {str(m) for m in (doc.space.method or doc.space.mode or ("ddtree",))}
    return found


def _predicted_words(race: PredictRace) -> str:
    """How the trace spent the starts, for the report's notes."""
    started = sum(1 for e in race.efforts.values() if e.starts)
    left = sum(1 for x in race.left_out if x in race.eliminated)
    text = (
        f"Predicted from a trace: {started} of {len(race.contenders)} configs started; "
        f"{left} never needed a start (dominated, or predicted below the leader)."
    )
    if race.fallback is not None:
        text += f" The check failed ({race.fallback}): every config races as without a trace."
    return text


__all__ = ["Predict", "PredictingRace"]
