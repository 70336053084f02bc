"""Per-configuration summaries: group trial records by label and describe each group.

One `ConfigSummary` per label holds what a single configuration's repeats can
say on their own: mean and t-interval of every metric, the ratio to the
baseline (Fieller interval), the acceptance-length distribution, the pooled
coding pass rate (Wilson interval) and the failed attempts. Comparisons
between configurations live in `recommend.py`. See docs/report.md "How the report is built".
"""

from __future__ import annotations

import math
import statistics as pystats
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ddtune.params import MODES, DecodeParams
from ddtune.records import METRIC_NAMES, MIX_TPS, TrialRecord, workload_metric
from ddtune.stats.blocked import block_of
from ddtune.stats.intervals import (
    MeanCI,
    VarianceComponents,
    positive_mean_ci,
    ratio_ci,
    variance_components,
    wilson_interval,
)

THROUGHPUT = "throughput_tps"  # derived per repeat: geometric mean of short_tps and long_tps
MEAN_METRICS = (
    "short_tps",
    "long_tps",
    THROUGHPUT,
    "short_ttft_s",
    "long_ttft_s",
    "acceptance_length",
    MIX_TPS,
)
REPORTED_METRICS = tuple(m for m in MEAN_METRICS if m != THROUGHPUT)  # read from records
RATIO_METRICS = ("short_tps", "long_tps", THROUGHPUT, MIX_TPS)
OBJECTIVE_METRICS = {  # [sweep] objective -> the per-trial value it optimises (higher is better)
    "throughput": THROUGHPUT,  # geometric mean of short_tps and long_tps
    "long_context": "long_tps",
    "short_context": "short_tps",
    "speedup": THROUGHPUT,  # ratio to the baseline per pass: paired, the baseline cancels
    "mix": MIX_TPS,  # tok/s over the bench's workloads, weighted by [bench] mix
}
WORKLOAD_MEANS = ("tps", "acceptance_length", "ttft_s", "e2e_s")  # per workload, as "<name>/tps"


def is_ratio_metric(metric: str) -> bool:
    """Metrics compared as ratios (pass by pass, and to the baseline): tok/s ones."""
    return metric in RATIO_METRICS or metric.endswith("/tps")


@dataclass
class Coding:
    passed: int
    total: int
    rate: float
    low: float  # Wilson interval
    high: float


@dataclass
class AcceptanceDistribution:
    """Per-request acceptance lengths pooled over the repeats."""

    n: int
    minimum: float
    p25: float
    median: float
    p75: float
    maximum: float


@dataclass
class FailureInfo:
    trial_id: int
    repeat: int
    status: str
    failure: str | None
    attempts: int
    detail: str | None
    log_tail_path: str | None


Cost = tuple[int, int, int, float]


@dataclass
class ConfigSummary:
    label: str
    params: DecodeParams
    vars: dict[str, Any]  # user variables of the config
    is_baseline: bool
    temperatures: list[float]
    trials: int
    done: int
    failures: list[FailureInfo]
    samples: dict[str, list[float]]  # metric -> one value per done repeat that reported it
    metrics: dict[str, MeanCI | None]
    by_pass: dict[str, dict[int, float]] = field(default_factory=dict)  # RATIO_METRICS -> block
    ratios: dict[str, MeanCI | None] = field(default_factory=dict)  # vs the baseline
    acceptance: AcceptanceDistribution | None = None
    coding: Coding | None = None
    notes: list[str] = field(default_factory=list)
    scores: dict[str, Coding] = field(default_factory=dict)  # workload -> pooled pass rate

    @property
    def cost(self) -> Cost:
        """Sort key for "cheaper": see `cost_key`."""
        return cost_key(self.params)

    def mean(self, metric: str) -> float | None:
        ci = self.metrics.get(metric)
        return None if ci is None else ci.mean

    def ci(self, metric: str) -> MeanCI:
        """The interval of a metric this config measured (a `KeyError` if it did not)."""
        ci = self.metrics.get(metric)
        if ci is None:
            raise KeyError(f"{self.label}: {metric} was not measured")
        return ci

    def to_dict(self) -> dict[str, Any]:
        """JSON-able; `params` in wire form."""
        return {**asdict(self), "params": self.params.to_wire()}


def summarize_configs(
    records: Sequence[TrialRecord], confidence: float = 0.95, passes_per_start: int = 1
) -> list[ConfigSummary]:
    """One summary per label, baseline first, then cheapest first.

    `by_pass` holds, per ratio metric, the geometric mean of the done repeats of
    each block (`passes_per_start` consecutive passes benched on one server start).
    """
    groups: dict[str, list[TrialRecord]] = {}
    for record in records:
        groups.setdefault(record.label, []).append(record)
    summaries = [_summarize_group(label, group, confidence) for label, group in groups.items()]
    for summary in summaries:
        summary.by_pass = _by_pass(groups[summary.label], passes_per_start)
    summaries.sort(key=lambda s: (not s.is_baseline, s.cost, s.label))
    baseline = next((s for s in summaries if s.is_baseline), None)
    if baseline is not None:
        for summary in summaries:
            if summary is not baseline:  # the baseline's ratio to itself is 1 by definition
                summary.ratios = _ratios(summary, baseline, confidence)
    return summaries


def cost_key(params: DecodeParams) -> Cost:
    """Mode rank (ar < dflash < ddtree), then `DecodeParams.cost()` of the canonical params.

    `cost()` alone ranks by budget, topk and window only, which would let a windowed
    dflash config count as cheaper than ar (both have budget 0, topk 1 when canonical).
    """
    canonical = params.canonical()
    return (MODES.index(canonical.mode), *canonical.cost())


def _summarize_group(label: str, group: list[TrialRecord], confidence: float) -> ConfigSummary:
    done = [r for r in group if r.status == "done"]
    samples = _metric_samples(done)
    summary = ConfigSummary(
        label=label,
        params=group[0].params,
        vars=dict(group[0].vars),
        is_baseline=any(r.is_baseline for r in group),
        temperatures=sorted({float(r.temperature) for r in group}),
        trials=len(group),
        done=len(done),
        failures=[_failure_info(r) for r in group if r.status != "done"],
        samples=samples,
        metrics={m: (positive_mean_ci(v, confidence) if v else None) for m, v in samples.items()},
        acceptance=_acceptance_distribution(done),
        coding=_coding(done, confidence),
        scores=_workload_scores(done, confidence),
    )
    if any((r.params, r.vars) != (group[0].params, group[0].vars) for r in group):
        summary.notes.append(f"records labelled {label!r} carry different configurations")
    if len(done) == 1:
        summary.notes.append("one completed repeat: no confidence interval (n = 1)")
    return summary


def _metric_samples(done: list[TrialRecord]) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {m: [] for m in MEAN_METRICS}
    for record in done:
        for metric, value in record_values(record).items():
            samples.setdefault(metric, []).append(value)
    return samples


def record_values(record: TrialRecord) -> dict[str, float]:
    """The metrics one trial reported, plus the derived throughput (geometric mean)."""
    values = {m: v for m in REPORTED_METRICS if (v := _number(record.metrics.get(m))) is not None}
    short, long = values.get("short_tps"), values.get("long_tps")
    if short is not None and long is not None and short > 0 and long > 0:
        values[THROUGHPUT] = math.sqrt(short * long)
    for workload, figures in record.workloads.items():
        for name in WORKLOAD_MEANS:
            if (value := _number(figures.get(name))) is not None:
                values[workload_metric(workload, name)] = value
    return values


def _by_pass(group: list[TrialRecord], passes_per_start: int) -> dict[str, dict[int, float]]:
    """metric -> block -> geometric mean of the done trials' positive values in the block."""
    logs: dict[str, dict[int, list[float]]] = {}
    for record in group:
        if record.status != "done":
            continue
        block = block_of(record.repeat, passes_per_start)
        for metric, value in record_values(record).items():
            if is_ratio_metric(metric) and value > 0:
                logs.setdefault(metric, {}).setdefault(block, []).append(math.log(value))
    return {
        metric: {b: math.exp(math.fsum(v) / len(v)) for b, v in blocks.items()}
        for metric, blocks in logs.items()
    }


def start_variance(
    records: Sequence[TrialRecord], passes_per_start: int
) -> dict[str, VarianceComponents]:
    """label -> variance of log throughput between server starts vs within one start.

    Only with `passes_per_start` > 1 (otherwise every start has one bench). A
    start is the server's `instance_id` (else its pid, else the block).
    """
    if passes_per_start < 2:
        return {}
    groups: dict[str, dict[str, list[float]]] = {}
    for record in records:
        value = record_values(record).get(THROUGHPUT) if record.status == "done" else None
        if value is None:
            continue
        identity = record.conditions.get("server_identity") or {}
        start = (
            identity.get("instance_id")
            or identity.get("pid")
            or block_of(record.repeat, passes_per_start)
        )
        groups.setdefault(record.label, {}).setdefault(str(start), []).append(math.log(value))
    out = {}
    for label, starts in groups.items():
        values = list(starts.values())
        if len(values) >= 2 and any(len(v) >= 2 for v in values):
            out[label] = variance_components(values)
    return out


def _ratios(
    summary: ConfigSummary, baseline: ConfigSummary, confidence: float
) -> dict[str, MeanCI | None]:
    ratios: dict[str, MeanCI | None] = {}
    for metric in [m for m in summary.samples if is_ratio_metric(m)]:
        num, den = summary.samples.get(metric) or [], baseline.samples.get(metric) or []
        ok = num and den and math.fsum(den) != 0
        ratios[metric] = ratio_ci(num, den, confidence) if ok else None
    return ratios


def _acceptance_distribution(done: list[TrialRecord]) -> AcceptanceDistribution | None:
    values = sorted(float(v) for r in done for v in r.acceptance_lengths)
    if not values:
        return None
    if len(values) == 1:
        q1 = med = q3 = values[0]
    else:
        q1, med, q3 = pystats.quantiles(values, n=4, method="inclusive")
    return AcceptanceDistribution(len(values), values[0], q1, med, q3, values[-1])


def _coding(done: list[TrialRecord], confidence: float) -> Coding | None:
    passed = total = 0
    for record in done:
        if record.coding is None or record.coding[1] <= 0:
            continue
        passed, total = passed + record.coding[0], total + record.coding[1]
    if total == 0:
        return None
    low, high = wilson_interval(passed, total, confidence)
    return Coding(passed, total, passed / total, low, high)


def _workload_scores(done: list[TrialRecord], confidence: float) -> dict[str, Coding]:
    """workload -> pass rate pooled over the done trials (scored workloads only)."""
    counts: dict[str, tuple[int, int]] = {}
    for record in done:
        for workload, figures in record.workloads.items():
            passed, total = _number(figures.get("passed")), _number(figures.get("total"))
            if passed is not None and total:
                have = counts.get(workload, (0, 0))
                counts[workload] = (have[0] + int(passed), have[1] + int(total))
    scores = {}
    for workload, (passed, total) in counts.items():
        low, high = wilson_interval(passed, total, confidence)
        scores[workload] = Coding(passed, total, passed / total, low, high)
    return scores


def workload_names(summaries: Sequence[ConfigSummary]) -> list[str]:
    """The workloads any config measured, in the order their metrics first appear."""
    names = [m.split("/")[0] for s in summaries for m in s.samples if m.endswith("/tps")]
    return list(dict.fromkeys(names))


def _failure_info(record: TrialRecord) -> FailureInfo:
    return FailureInfo(
        trial_id=record.trial_id,
        repeat=record.repeat,
        status=record.status,
        failure=record.failure,
        attempts=record.attempts,
        detail=record.failure_detail,
        log_tail_path=record.log_tail_path,
    )


def _number(value: Any) -> float | None:
    """A finite float, or None for missing / non-numeric / NaN values."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def unknown_metric_names(records: Sequence[TrialRecord]) -> list[str]:
    """Metric keys the report does not know (reported as a warning, never silently dropped)."""
    return sorted({k for r in records for k in r.metrics} - set(METRIC_NAMES))
