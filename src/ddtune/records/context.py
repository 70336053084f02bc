"""How a sweep ran, for the report's words: `SweepContext` and each race exit (`Elimination`).

The sweep builds them (`ddtune.sweep.plan` replays a race from the store,
`ddtune.sweep.reporting` hands them over); the report only reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ddtune.stats.blocked import Verdict


@dataclass(frozen=True)
class Elimination:
    """When and why a config left a race (`ddtune.sweep.plan.races.by_pass` decides, the report tells)."""

    label: str
    at_pass: int
    reason: str  # "worse" | "pass_rate" | "failed"
    detail: str
    p_value: float | None = None  # Holm-adjusted


@dataclass(frozen=True)
class PredictedConfig:
    """What a forecast predicted for one config, to set beside what was measured."""

    label: str
    acceptance: float | None  # τ as the service counts it (None: its engine reports none)
    objective: tuple[float, float, float] | None  # the objective's tok/s: point, 95% low, high
    status: str  # "started" | "dominated" | "predicted out" | "not started"
    check: str | None = None  # the predicting race's check of it, in words


@dataclass
class SweepContext:
    """How the sweep was run, for the report's words (strategy, race history)."""

    strategy: str = "grid"  # the report's word for how the sweep ran (the strategy's)
    objective: str = "throughput"
    passes: int = 0  # finished passes (blocks)
    stop: str | None = None  # why a race stopped
    exits: list[Elimination] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. what an Optuna search explored
    efforts: dict[str, tuple[int, int]] = field(default_factory=dict)  # label -> starts, benches
    verdict: Verdict | None = None  # a restart-bound race's own answer (its mixed model)
    store: str | None = None  # the sweep's store, for the command that applies the answer
    predictions: list[PredictedConfig] = field(default_factory=list)  # strategy predict
    predicted_from: str = "a trace"  # what the predictions read (a trace folder, the answers)
    fallback: str | None = None  # why a predicting race went on racing every config
    race: bool = False  # a race decided: its passes, stop and exits are the report's section

    def exit_of(self, label: str) -> Elimination | None:
        return next((e for e in self.exits if e.label == label), None)
