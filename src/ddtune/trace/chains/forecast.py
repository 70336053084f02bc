"""What one run at the largest K says of every chain config of its group (a predicting race).

    anchors = chain_anchors(configs)           # label -> the label of its group's largest K
    run = ChainRun(counts, {"short": 4.4, "long": 3.9})   # the anchor's first bench
    forecast = chains_forecast(configs, {anchor: run}, objective)

A group is the configs of one chain method (EAGLE, EAGLE-3, MTP) at topk 1 that
differ in `num_steps` only. Its largest K is started once; its per-position
counts (`predict.py`) give τ at every smaller K, and each workload's τ is
scaled by the same factor as the pooled one (the counts pool the workloads).
An estimate, not exact: the race checks each config's measured τ against it at
its first start and corrects the group by the misses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ddtune.methods import CHAIN_METHODS
from ddtune.params import DecodeParams
from ddtune.trace.chains.predict import ChainCounts, predict_tau
from ddtune.trace.forecast import Forecast, config_cost
from ddtune.trace.round_cost import Shape


@dataclass(frozen=True)
class ChainRun:
    """An anchor's first bench: its per-position counts and its τ per workload."""

    counts: ChainCounts
    tau: Mapping[str, float]  # workload -> τ measured (the engine's counters)
    # workload -> its own counts (then its τ at every K is its own estimate, not scaled)
    by_workload: Mapping[str, ChainCounts] = field(default_factory=dict)


def chain_group(params: DecodeParams) -> tuple[object, ...] | None:
    """The configs predicted from one run: the method and every knob but the steps (None:
    not a chain at topk 1 with its steps set)."""
    if params.method not in CHAIN_METHODS:
        return None
    knobs = dict(params.method_knobs)
    if knobs.get("topk", 1) != 1 or not isinstance(knobs.get("num_steps"), int):
        return None
    rest = tuple(
        sorted((k, v) for k, v in knobs.items() if k not in ("num_steps", "num_draft_tokens"))
    )
    return (params.method, rest)


def chain_anchors(configs: Mapping[str, DecodeParams]) -> dict[str, str]:
    """label -> the label of its group's largest `num_steps` (the one run that predicts it)."""
    groups: dict[tuple[object, ...], list[str]] = {}
    for label, params in configs.items():
        key = chain_group(params)
        if key is not None:
            groups.setdefault(key, []).append(label)
    return {
        label: max(labels, key=lambda x: _steps(configs[x]))
        for labels in groups.values()
        for label in labels
    }


def chains_forecast(
    configs: Mapping[str, DecodeParams],
    runs: Mapping[str, ChainRun],
    objective: str = "throughput",
) -> Forecast:
    """Every chain config whose anchor ran (`runs`: anchor label -> its run), one group per
    anchor; the configs of other methods are left out."""
    shapes: dict[str, dict[str, Shape]] = {}
    groups: dict[str, str] = {}
    acceptance: dict[str, float | None] = {}  # pooled as the counters pool: every workload's
    for label, anchor in chain_anchors(configs).items():
        run, steps = runs.get(anchor), _steps(configs[label])
        if run is None or steps > run.counts.k:  # (positions the engine did not count)
            continue
        shapes[label] = {w: _shape(_tau(run, w, steps), steps) for w in sorted(run.tau)}
        groups[label] = f"the counts of {anchor}"
        acceptance[label] = predict_tau(run.counts, steps).tau
    source = "the largest num_steps's counts per draft position (an estimate)"
    return Forecast(shapes, acceptance, config_cost(configs), objective, {}, source, groups)


def merged(first: Forecast, second: Forecast) -> Forecast:
    """Two forecasts of one sweep's configs as one (the baseline's outputs and the chains')."""
    sources = " and ".join(s for s in (first.source, second.source) if s)
    return Forecast(
        {**first.shapes, **second.shapes},
        {**first.acceptance, **second.acceptance},
        first.cost,
        first.objective,
        {**first.weights, **second.weights},
        sources,
        {**first.groups, **second.groups},
    )


def _tau(run: ChainRun, workload: str, steps: int) -> float:
    """τ at `steps` on `workload`: from its own counts where they reach that far, else its
    measured τ scaled as the pooled estimate scales."""
    own = run.by_workload.get(workload)
    if own is not None and steps <= own.k:
        return predict_tau(own, steps).tau
    pooled = predict_tau(run.counts, steps).tau
    scale = (pooled - 1) / (run.counts.tau - 1) if run.counts.tau > 1 else 1.0
    return 1 + (run.tau[workload] - 1) * scale


def _shape(tau: float, steps: int) -> Shape:
    return Shape("chain", tau, steps + 1, 0.0, tau, draft_steps=steps)


def _steps(params: DecodeParams) -> int:
    steps = dict(params.method_knobs).get("num_steps")
    return steps if isinstance(steps, int) else 0
