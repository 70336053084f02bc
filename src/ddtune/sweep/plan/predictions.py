"""What a `[sweep] trace` predicts of a sweep's configs: read once a command, shown beside the
measurements, and what strategy "predict" decides from.

    forecast = spec_forecast(spec)            # the trace read and checked (UserError: exit 2)
    forecast = stored_forecast(spec, mode)    # the one kept with the sweep, else the trace's
    observations = store_observations(records, forecast)  # seconds per round, done trials
    traced_context(spec, forecast, store, id, ctx, start_sd)  # a grid's or race's report

A trace predicts only the requests its bench sends (`check_requests`) and the
models its service serves (`trace_binding`: a UserError naming both models when
they differ; notes on what cannot be checked here). Seconds per round come from
a cost model of measured trials (`ddtune.trace.round_cost`). See docs/traces.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ddtune.engines import get_engine
from ddtune.records import SweepContext, TrialRecord
from ddtune.sweep.plan.races.predicting import predicted_configs
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.modes import SweepMode
from ddtune.sweep.store.records import trial_records
from ddtune.trace.forecast import Forecast, build_forecast, check_requests, config_cost
from ddtune.trace.predict import Trace
from ddtune.trace.round_cost import CostModel, Observation


def spec_forecast(spec: SweepSpec) -> Forecast:
    """The spec's trace, checked against its bench and its models, and its forecast."""
    assert spec.trace is not None
    trace = Trace.read(spec.trace)
    check_requests(trace, spec.bench)
    trace_binding(spec)
    params = spec.params_by_label()
    return build_forecast(trace, params, get_engine(spec.service.engine), spec.objective)


def stored_forecast(spec: SweepSpec, mode: SweepMode) -> Forecast:
    """The forecast kept with the sweep (`store/modes.py`), else the trace's now."""
    if mode.forecast is None:
        return spec_forecast(spec)
    params = spec.params_by_label()
    return Forecast.from_json(mode.forecast, config_cost(params))


def trace_binding(spec: SweepSpec) -> list[str]:
    """The trace checked against the models the spec's service loads (`trace.binding`):
    notes on what cannot be checked here, a UserError naming both models when they differ."""
    from ddtune.sweep.spec.served import spec_models
    from ddtune.trace.binding import bind_trace
    from ddtune.trace.files import read_header

    assert spec.trace is not None
    return bind_trace(read_header(Path(spec.trace)), spec_models(spec), spec.trace)


def traced_context(
    spec: SweepSpec,
    forecast: Forecast,
    store: Store,
    sweep_id: int,
    context: SweepContext,
    start_sd: float,
) -> None:
    """A grid's or a plain race's report with `[sweep] trace`: each config's predicted τ and
    tok/s (a cost model of this sweep's measured trials, a start moving a config by
    `start_sd`) beside the measurements."""
    records = trial_records(store, sweep_id)
    observations = store_observations(records, forecast)
    model = CostModel(forecast.shapes, observations, spec.seed, start_sd=start_sd)
    done = {r.label for r in records if r.status == "done"}
    statuses = {
        c.label(): "started" if c.label() in done else "not started" for c, _ in spec.all_configs()
    }
    context.predictions = predicted_configs(forecast, model, statuses, seed=spec.seed)


def store_observations(records: Iterable[TrialRecord], forecast: Forecast) -> list[Observation]:
    """One observation per done trial and workload of configs the forecast knows."""
    out = []
    for record in records:
        shapes = forecast.shapes.get(record.label)
        if record.status != "done" or shapes is None:
            continue
        for w, shape in shapes.items():
            tps = record.metrics.get(f"{w}_tps")
            if isinstance(tps, int | float) and tps > 0:
                seconds = shape.tokens_per_round / tps
                out.append(Observation(record.label, w, seconds, record.trial_id))
    return out


__all__ = [
    "spec_forecast",
    "store_observations",
    "stored_forecast",
    "trace_binding",
    "traced_context",
]
