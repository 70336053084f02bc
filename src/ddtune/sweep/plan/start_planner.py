"""A restart-bound race run from the store: replay the finished trials, plan the next one.

    planner = StartPlanner(spec, store, sweep_id, mode)
    race = planner.state()          # StartRace from the stored trials (a pure replay)
    rows = planner.next_batch()     # the next trial, added to the store; [] = stopped

A trial is one bench: bench b of the config's start s is stored as repeat
(s - 1) · most_benches + b, so the runner benches the start still serving
when the next trial has the same config and start (`passes_per_start` reuse)
and restarts otherwise. Each finished trial is folded in with its objective,
its coding counts, when it ended (hours since the sweep's first attempt) and
whether its attempt restarted the server (`store/modes.py: trial_times`): a
bench rerun on a new start after a resume is analysed with that new start.
Nothing decides from memory: the cached race is reused only while the stored
trials it folded are unchanged, so a race killed at any moment and resumed
plans exactly what the uninterrupted one would have. See docs/sweeps.md "Restart-bound races".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ddtune.engines import get_engine
from ddtune.errors import UserError
from ddtune.records import SweepContext, TrialRecord
from ddtune.report.summarize import cost_key
from ddtune.stats.blocked import block_of
from ddtune.sweep.plan.passes import objective_value
from ddtune.sweep.plan.predict_race import PredictRace, predicted_configs
from ddtune.sweep.plan.starts import BenchResult, StartRace, StartSettings
from ddtune.sweep.spec.parse import Config, SweepSpec
from ddtune.sweep.store.db import PlannedTrial, Store
from ddtune.sweep.store.modes import SweepMode, trial_times
from ddtune.sweep.store.records import trial_records
from ddtune.sweep.store.rows import TrialRow
from ddtune.trace.forecast import (
    Forecast,
    build_forecast,
    check_requests,
    config_cost,
    identity_mismatch,
)
from ddtune.trace.predict import Trace
from ddtune.trace.round_cost import WORKLOADS, CostModel, Observation

FINISHED = ("done", "failed")


def start_settings(spec: SweepSpec, mode: SweepMode) -> StartSettings:
    """The spec's race, restart-bound: repeats = most passes, passes_per_start = most benches."""
    start_s, bench_s = mode.start_s, mode.bench_s
    if start_s is None or bench_s is None:  # pinned on without costs: a start counts as a bench
        start_s = bench_s = 1.0
    return StartSettings(
        tolerance=spec.tolerance,
        most_benches=mode.most_benches,
        max_passes=spec.repeats,
        min_passes=min(spec.restart_bound.min_passes, spec.repeats),
        max_trials=spec.max_trials,
        max_hours=spec.max_hours,
        start_s=start_s,
        bench_s=bench_s,
    )


class StartPlanner:
    def __init__(
        self,
        spec: SweepSpec,
        store: Store,
        sweep_id: int,
        mode: SweepMode,
        configs: Sequence[tuple[Config, bool]] | None = None,
    ) -> None:
        self.spec, self.store, self.sweep_id, self.mode = spec, store, sweep_id, mode
        self.configs = list(configs if configs is not None else spec.all_configs())
        self.settings = start_settings(spec, mode)
        self._race: StartRace | None = None
        self._folded: list[BenchResult] = []
        self.forecast = stored_forecast(spec, mode, self.configs) if spec.predicting else None

    def results(self) -> list[BenchResult]:
        """The finished trials in run order, up to the first unfinished one."""
        times = trial_times(self.store, self.sweep_id)
        seconds = self.store.trial_seconds(self.sweep_id)
        out = []
        for record in trial_records(self.store, self.sweep_id):
            if record.status not in FINISHED:
                break
            hours, fresh = times.get(record.trial_id, (0.0, True))
            out.append(self._result(record, hours, fresh, seconds.get(record.trial_id, 0.0)))
        return out

    def state(self) -> StartRace:
        """The race after the stored trials (the cached fold when it is a prefix of them)."""
        results = self.results()
        if self._race is None or results[: len(self._folded)] != self._folded:
            self._race = self._new_race()
            self._folded = []
        for result in results[len(self._folded) :]:
            self._fold(result)
        return self._race

    def next_batch(self) -> list[TrialRow]:
        """The race's unfinished trial (a resumed one), else the next one ([] = stopped)."""
        unfinished = self.store.trials(self.sweep_id, ("pending", "interrupted"))
        if unfinished or self.store.trials(self.sweep_id, ("running",)):
            return unfinished
        step = self.state().next()
        if step is None:
            return []
        config, is_baseline = next((c, b) for c, b in self.configs if c.label() == step.label)
        repeat = (step.start - 1) * self.settings.most_benches + step.bench
        index = self.store.next_order_index(self.sweep_id)
        return self.store.add_trials(
            self.sweep_id, [PlannedTrial(index, config, repeat, is_baseline)]
        )

    def outcome(self) -> str:
        race = self.state()
        starts = sum(e.starts for e in race.efforts.values())
        benches = sum(e.benches for e in race.efforts.values())
        left = ", ".join(
            f"{e.label} (pass {e.at_pass}, {e.reason})" for e in race.eliminated.values()
        )
        return (
            f"restart-bound race: {race.pass_no} pass(es), {starts} start(s), {benches} "
            f"bench(es), stopped: {race.stop or 'not yet'}; still in: "
            f"{', '.join(race.alive) or 'none'}; left: {left or 'none'}"
        )

    def context(self) -> SweepContext:
        """What the report says about this race: its verdict, who left when and why, efforts."""
        race = self.state()
        params = {config.label(): config.params for config, _ in self.configs}
        verdict = race.verdict(lambda label: (cost_key(params[label]), label))
        efforts = {label: (e.starts, e.benches) for label, e in race.efforts.items() if e.starts}
        context = SweepContext("race", self.spec.objective, race.pass_no, race.stop)
        context.exits = list(race.eliminated.values())
        context.efforts, context.verdict = efforts, verdict
        context.notes.append(f"Restart-bound race ({self.mode.reason}): {_words(race)}")
        if isinstance(race, PredictRace):
            context.predictions, context.fallback = race.predictions(), race.fallback
            context.notes.append(_predicted_words(race))
        return context

    def _new_race(self) -> StartRace:
        labels = tuple(config.label() for config, _ in self.configs)
        baseline = next((c.label() for c, is_base in self.configs if is_base), None)
        if self.forecast is None:
            return StartRace(labels, baseline, self.settings, self.spec.seed)
        return PredictRace(labels, baseline, self.settings, self.spec.seed, forecast=self.forecast)

    def _fold(self, result: BenchResult) -> None:
        assert self._race is not None
        try:
            self._race.add(result)
        except ValueError as exc:
            raise UserError(
                f"{self.store.path}: sweep {self.spec.name} does not follow its restart-bound "
                f"race ({exc}); resume it with the ddtune that started it, or start afresh "
                "with --store NEW_PATH"
            ) from None
        self._folded.append(result)

    def _result(
        self, record: TrialRecord, hours: float, fresh: bool, seconds: float
    ) -> BenchResult:
        k = self.settings.most_benches
        result = BenchResult(
            record.label,
            block_of(record.repeat, k),
            (record.repeat - 1) % k + 1,
            objective_value(record, self.spec.objective),
            record.coding,
            hours,
            seconds,
            fresh,
        )
        if self.forecast is None or record.status != "done":
            return result
        tps = tuple(
            (w, float(v))
            for w in WORKLOADS
            if isinstance(v := record.metrics.get(f"{w}_tps"), int | float) and v > 0
        )
        identity = record.conditions.get("server_identity") or {}
        return replace(
            result,
            tps=tps,
            acceptance=record.metrics.get("acceptance_length"),
            unpredicted=identity_mismatch(self.forecast, identity),
        )


def spec_forecast(spec: SweepSpec, configs: Sequence[tuple[Config, bool]]) -> Forecast:
    """The spec's trace, checked against its bench, and its forecast (UserError: exit 2)."""
    assert spec.trace is not None
    trace = Trace.read(spec.trace)
    check_requests(trace, spec.bench)
    params = {config.label(): config.params for config, _ in configs}
    trace_binding(spec)
    return build_forecast(trace, params, get_engine(spec.service.engine), spec.objective)


def trace_binding(spec: SweepSpec) -> list[str]:
    """The trace checked against the models the spec's service loads (`trace.binding`):
    notes on what cannot be checked here, a UserError naming both models when they differ."""
    from ddtune.sweep.spec.served import spec_models
    from ddtune.trace.binding import bind_trace
    from ddtune.trace.files import read_header

    assert spec.trace is not None
    return bind_trace(read_header(Path(spec.trace)), spec_models(spec), spec.trace)


def stored_forecast(
    spec: SweepSpec, mode: SweepMode, configs: Sequence[tuple[Config, bool]]
) -> Forecast:
    """The forecast kept with the sweep (`store/modes.py`), else the trace's now."""
    if mode.forecast is None:
        return spec_forecast(spec, configs)
    params = {config.label(): config.params for config, _ in configs}
    return Forecast.from_json(mode.forecast, config_cost(params))


def predicted_lines(spec: SweepSpec, store: Store | None) -> list[str]:
    """What `sweep plan` prints for a spec that names a trace: every config's predicted τ and,
    once a store of the same service has measured trials, its tok/s; the dominated ones."""
    if spec.trace is None:
        return []
    configs = spec.all_configs()
    forecast = spec_forecast(spec, configs)
    observations = _store_observations(store, forecast) if store is not None else []
    model = CostModel(forecast.shapes, observations, spec.seed)
    labels = [c.label() for c, _ in configs]
    head = f"predicted from the trace {spec.trace} (T = 0"
    head += (
        f"; tok/s from a round-cost model of {len(observations)} measured start-workload(s) "
        f"in {store.path}):"
        if observations and store is not None
        else "; tok/s once trials are measured: ranked by tau):"
    )

    def key(x: str) -> float:
        if observations:
            return -model.interval(x, spec.objective).point
        return -(forecast.acceptance.get(x) or 1.0)

    lines = [head]
    for label in sorted(labels, key=key):
        tau = forecast.acceptance.get(label)
        text = f"  {label:<28} tau {'-' if tau is None else f'{tau:.2f}':>5}"
        if observations:
            text += f"  {model.interval(label, spec.objective).text()} tok/s"
        better = next((a for a in labels if forecast.dominates(a, label)), None)
        if better is not None:
            text += f"  (dominated by {better}: never faster, never started by predict)"
        lines.append(text)
    if spec.races_unpredicted:
        lines.append("  the bench is not at T = 0: a trace predicts T = 0 only, so the sweep races")
    return lines


def traced_context(spec: SweepSpec, store: Store, sweep_id: int, context: SweepContext) -> None:
    """A grid's or a plain race's report with `[sweep] trace`: each config's predicted τ and
    tok/s (a cost model of this sweep's measured trials) beside the measurements."""
    try:
        forecast = spec_forecast(spec, spec.all_configs())
    except UserError as exc:
        context.notes.append(f"No predictions: {exc}")
        return
    model = CostModel(forecast.shapes, _store_observations(store, forecast, sweep_id), spec.seed)
    done = {r.label for r in trial_records(store, sweep_id) if r.status == "done"}
    statuses = {
        c.label(): "started" if c.label() in done else "not started" for c, _ in spec.all_configs()
    }
    context.predictions = predicted_configs(forecast, model, statuses, seed=spec.seed)


def _store_observations(
    store: Store, forecast: Forecast, sweep_id: int | None = None
) -> list[Observation]:
    """One observation per done trial and workload of configs the forecast knows (of one
    sweep, or of every sweep in the store)."""
    out = []
    ids = [sweep_id] if sweep_id is not None else store.sweep_ids()
    for sid in ids:
        for record in trial_records(store, sid):
            shapes = forecast.shapes.get(record.label)
            if record.status != "done" or shapes is None:
                continue
            for w, shape in shapes.items():
                tps = record.metrics.get(f"{w}_tps")
                if isinstance(tps, int | float) and tps > 0:
                    out.append(
                        Observation(record.label, w, shape.tokens_per_round / tps, record.trial_id)
                    )
    return out


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


def _words(race: StartRace) -> str:
    """How the race spent its starts, for the report's notes."""
    cut = sum(e.cut for e in race.efforts.values())
    components = race.components
    spread = (
        ""
        if components is None
        else f" Model: {components.start.sd:.1%} between starts ({components.start.df:.0f} df "
        f"with the prior), {components.bench.sd:.1%} between benches of a start, drift "
        f"{components.drift.sd:.1%} per sqrt(hour)."
    )
    return (
        f"each config started once in pass 1, then only the configs still in the race; "
        f"{cut} start(s) stopped early by the sequential test.{spread}"
    )


__all__ = [
    "StartPlanner",
    "predicted_lines",
    "spec_forecast",
    "start_settings",
    "stored_forecast",
    "traced_context",
]
