"""Machine-readable outputs: `results.csv` (one row per config) and `results.json` (everything).

Parameters are written in wire form (`DecodeParams.to_wire()`); see docs/report.md "How the report is built".
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ddtune.records import TrialRecord, workload_metric
from ddtune.report.render.atomic import atomic_path, write_atomic
from ddtune.report.result import ReportSummary
from ddtune.report.summarize import MEAN_METRICS, RATIO_METRICS, WORKLOAD_MEANS, ConfigSummary


def csv_row(summary: ReportSummary, s: ConfigSummary) -> dict[str, Any]:
    row: dict[str, Any] = {"label": s.label, "is_baseline": s.is_baseline}
    row.update(s.params.to_wire())
    row.update(trials=s.trials, done=s.done, failed=len(s.failures))
    for metric in MEAN_METRICS:
        ci = s.metrics.get(metric)
        row.update(_ci_columns(metric, ci))
    for metric in RATIO_METRICS:
        row.update(_ci_columns(f"{metric}_ratio", s.ratios.get(metric)))
    c = s.coding
    row.update(
        coding_passed=None if c is None else c.passed,
        coding_total=None if c is None else c.total,
        pass_rate=None if c is None else c.rate,
        pass_rate_low=None if c is None else c.low,
        pass_rate_high=None if c is None else c.high,
    )
    comparison = summary.pass_rates.get(s.label)
    row["fisher_p_vs_best"] = None if comparison is None else comparison.p_value
    verdict = summary.lossless.get(s.label)
    row["lossless"] = None if verdict is None else verdict.status
    row["divergence_class"] = None if verdict is None else verdict.divergence_class
    row["divergence_gap"] = None if verdict is None else verdict.gap
    row["pareto"] = s.label in summary.pareto
    for workload in [] if summary.workloads is None else summary.workloads.names:
        for name in WORKLOAD_MEANS:  # "humaneval_tps_mean", ... (the report's "humaneval/tps")
            metric = workload_metric(workload, name)
            row.update(_ci_columns(metric.replace("/", "_"), s.metrics.get(metric)))
        score = s.scores.get(workload)
        row[f"{workload}_passed"] = None if score is None else score.passed
        row[f"{workload}_total"] = None if score is None else score.total
    return row


def write_csv(summary: ReportSummary, path: Path) -> None:
    """One row per config; every column any row has (a config naming a method adds `method`
    and `method_knobs`, as JSON), blank where a row has none."""
    rows = [csv_row(summary, s) for s in summary.configs]
    fields = list(dict.fromkeys(key for row in rows for key in row)) or ["label"]
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, restval="")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(v) for k, v in row.items()})


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value


def write_json(summary: ReportSummary, records: Sequence[TrialRecord], path: Path) -> None:
    data = {"report": summary.to_dict(), "trials": [r.to_dict() for r in records]}
    write_atomic(path, json.dumps(_finite(data), indent=2, default=str) + "\n")


def _ci_columns(name: str, ci: Any) -> dict[str, Any]:
    if ci is None:
        return {f"{name}_mean": None, f"{name}_low": None, f"{name}_high": None, f"{name}_n": None}
    return {
        f"{name}_mean": ci.mean,
        f"{name}_low": ci.low,
        f"{name}_high": ci.high,
        f"{name}_n": ci.n,
    }


def _finite(value: Any) -> Any:
    """Strict JSON: NaN and infinities become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
