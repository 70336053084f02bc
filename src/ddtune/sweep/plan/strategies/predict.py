"""Strategy "predict": a trace (`[sweep] trace`) predicts every config's speed at T = 0;
a restart-bound race starts the baseline and the fewest and most verify tokens first,
then only configs the trace says could still win. Above T = 0 a trace cannot predict:
the sweep races as strategy "race" does (restart-bound or not, by the same rule)."""

from __future__ import annotations

from ddtune.sweep.plan.estimate import TrialCosts
from ddtune.sweep.plan.strategies.base import Strategy
from ddtune.sweep.plan.strategies.race import Race
from ddtune.sweep.plan.strategies.restart_bound import RestartBoundRace
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.store.modes import SweepMode

PREDICT_LATER = (
    "; a predicting race plans one bench at a time from the results: the baseline and the "
    "fewest and most verify tokens first, then only configs the trace says could still win "
    "(the dominated ones never)"
)


class Predict(Race):
    name = "predict"

    def choose_mode(self, spec: SweepSpec, costs: TrialCosts | None) -> SweepMode:
        """Restart-bound, with the trace's forecast fixed with the new sweep (at T = 0)."""
        if not spec.predicting:
            return super().choose_mode(spec, costs)
        from ddtune.sweep.plan.start_planner import spec_forecast

        start_s, bench_s = (costs.start_s, costs.bench_s) if costs is not None else (None, None)
        why = (
            "strategy predict: the trace chooses which configs start, a restart-bound race confirms"
        )
        forecast = spec_forecast(spec, spec.all_configs()).to_json()
        most = spec.restart_bound.most_benches
        return SweepMode(True, why, start_s, bench_s, most, forecast=forecast)

    def resolve(self, spec: SweepSpec, mode: SweepMode) -> Strategy:
        if not mode.restart_bound:
            return self
        return PredictingRace() if spec.predicting else RestartBoundRace()


class PredictingRace(RestartBoundRace):
    """The restart-bound race of a predicting sweep (the planner reads the stored forecast)."""

    name = "predicting race"

    def later(self, spec: SweepSpec) -> str:
        return PREDICT_LATER


__all__ = ["PREDICT_LATER", "Predict", "PredictingRace"]
