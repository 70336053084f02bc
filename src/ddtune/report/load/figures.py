"""Load levels in the report: per (config, level) figures over the repeats.

    report = analyze_load(records, configs, pass_rates, options)   # None without [bench.load]
    report.levels            # level keys in run order: "c1", "c4", "r0.5", ...
    report.figure(label, "c4")  # LevelFigures: per-repeat samples + MeanCI of each figure,
                             # latency percentiles pooled over the repeats' request rows
    report.recommendations   # one per level (per_level.py), report.mix for load_weights
    report.crossovers; report.serialisation; report.max_rate

Each repeat of a config contributes one value per figure and level (its
output tok/s, goodput, p99 TTFT, ...), so every figure gets a t-interval over
repeats like the single-stream metrics, and `by_pass` keys the values by block
(pass, or start with `passes_per_start`) for the blocked analysis
(`stats/blocked.py`). The latency percentiles shown in the
tables are pooled over the per-request rows of all repeats (the store's
`load_requests`). Max-rate search probes are not levels: they give each
repeat's `max_rate`. See docs/report.md "How the report is built".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ddtune.bench.load.latency import Distribution, LevelResult
from ddtune.records import TrialRecord
from ddtune.report.render.plots import Plot
from ddtune.stats.blocked import block_of
from ddtune.stats.intervals import MeanCI, positive_mean_ci

REPEAT_FIGURES = (  # LevelResult attribute (or distribution.p99) -> figure name
    ("output_tps", "output_tps"),
    ("request_rate", "request_rate"),
    ("goodput_tps", "goodput_tps"),
    ("goodput_rps", "goodput_rps"),
    ("slo_attainment", "slo_attainment"),
    ("acceptance_length", "acceptance_length"),
    ("ttft_s.p99", "ttft_p99_s"),
    ("itl_s.p99", "itl_p99_s"),
    ("e2e_s.p99", "e2e_p99_s"),
    ("e2e_s.mean", "e2e_mean_s"),
)
POOLED = ("ttft_s", "itl_s", "e2e_s")
FLOOR = 1e-9  # a figure of 0 (no request met the SLO) counts as this in the log-scale analysis


@dataclass
class LevelFigures:
    """One config at one load level, over its repeats."""

    label: str
    level: str
    loop: str
    concurrency: int | None
    rate: float | None
    repeats: int = 0  # repeats that measured this level
    failed: int = 0  # repeats where every request of the level failed
    errors: list[str] = field(default_factory=list)
    serialised: int = 0  # repeats that streamed one request at a time with several waiting
    samples: dict[str, list[float]] = field(default_factory=dict)  # figure -> one per repeat
    by_pass: dict[str, dict[int, float]] = field(default_factory=dict)  # figure -> block -> value
    metrics: dict[str, MeanCI | None] = field(default_factory=dict)
    pooled: dict[str, Distribution | None] = field(default_factory=dict)  # over request rows

    def mean(self, figure: str) -> float | None:
        ci = self.metrics.get(figure)
        return None if ci is None else ci.mean

    @property
    def is_serialised(self) -> bool:
        """At least half of the repeats that measured the level streamed one request at a time."""
        done = self.repeats - self.failed
        return done > 0 and self.serialised * 2 >= done


@dataclass
class LoadRecommendation:
    level: str  # a level key, or "mix"
    metric: str
    status: str  # "recommended" | "inconclusive" | "no data"
    label: str | None
    text: str
    contenders: list[str] = field(default_factory=list)


@dataclass
class LoadReport:
    levels: list[str]
    figures: list[LevelFigures]
    slo: bool  # the levels were measured against an SLO (goodput is the objective)
    recommendations: list[LoadRecommendation] = field(default_factory=list)
    mix: LoadRecommendation | None = None
    crossovers: list[str] = field(default_factory=list)
    serialisation: list[str] = field(default_factory=list)
    best_changes: str | None = None  # whether the recommended config changes with load
    max_rate: dict[str, MeanCI | None] = field(default_factory=dict)  # label -> over repeats
    max_rate_notes: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)  # plots.py
    skipped_plots: list[str] = field(default_factory=list)

    def figure(self, label: str, level: str) -> LevelFigures | None:
        return next((f for f in self.figures if f.label == label and f.level == level), None)

    def at(self, level: str) -> list[LevelFigures]:
        return [f for f in self.figures if f.level == level]


def level_figures(
    records: Sequence[TrialRecord], confidence: float, passes_per_start: int = 1
) -> LoadReport | None:
    """The figures of every (config, level) of the done records; None when none ran load."""
    done = [r for r in records if r.status == "done" and r.load.get("levels")]
    if not done:
        return None
    figures: dict[tuple[str, str], LevelFigures] = {}
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    blocks: dict[tuple[str, str], dict[str, dict[int, list[float]]]] = {}
    order: dict[str, LevelResult] = {}
    for record in done:
        for data in record.load["levels"]:
            level = LevelResult.from_dict(data)
            if level.search:
                continue
            order.setdefault(level.key, level)
            key = (record.label, level.key)
            fig = figures.setdefault(key, _empty(record.label, level))
            _add(fig, level, block_of(record.repeat, passes_per_start), blocks.setdefault(key, {}))
        for row in record.load.get("requests") or []:
            rows.setdefault((record.label, str(row.get("level"))), []).append(row)
    for key, fig in figures.items():
        fig.metrics = {
            name: positive_mean_ci(v, confidence) if v else None for name, v in fig.samples.items()
        }
        fig.pooled = _pooled(rows.get(key, []))
        fig.by_pass = {name: _geometric(b) for name, b in blocks.get(key, {}).items()}
    levels = sorted(
        order.values(), key=lambda lv: (lv.loop != "closed", lv.concurrency or lv.rate or 0)
    )
    slo = any(f.samples.get("slo_attainment") for f in figures.values())
    return LoadReport([lv.key for lv in levels], list(figures.values()), slo)


def max_rates(records: Sequence[TrialRecord], confidence: float) -> tuple[dict, dict]:
    """Per label: the max-rate search result over the repeats (MeanCI) and its notes."""
    values: dict[str, list[float]] = {}
    notes: dict[str, list[str]] = {}
    for record in records:
        found = record.load.get("max_rate") if record.status == "done" else None
        if not isinstance(found, dict):
            continue
        values.setdefault(record.label, [])
        if isinstance(found.get("max_rate"), int | float):
            values[record.label].append(float(found["max_rate"]))
        if found.get("note"):
            notes.setdefault(record.label, []).append(f"repeat {record.repeat}: {found['note']}")
    cis = {label: positive_mean_ci(v, confidence) if v else None for label, v in values.items()}
    return cis, notes


def _empty(label: str, level: LevelResult) -> LevelFigures:
    return LevelFigures(label, level.key, level.loop, level.concurrency, level.rate)


def _add(
    fig: LevelFigures, level: LevelResult, block: int, blocks: dict[str, dict[int, list[float]]]
) -> None:
    fig.repeats += 1
    if level.status != "done":
        fig.failed += 1
        fig.errors.append(level.error or "failed")
        return
    fig.serialised += int(level.serialised)
    for path, name in REPEAT_FIGURES:
        value = _value(level, path)
        if value is not None:
            fig.samples.setdefault(name, []).append(value)
            blocks.setdefault(name, {}).setdefault(block, []).append(max(value, FLOOR))


def _geometric(values: dict[int, list[float]]) -> dict[int, float]:
    """Per block the geometric mean of its values (several passes may share a start)."""
    return {b: math.exp(math.fsum(map(math.log, v)) / len(v)) for b, v in values.items()}


def _value(level: LevelResult, path: str) -> float | None:
    head, _, tail = path.partition(".")
    value: Any = getattr(level, head)
    if tail and value is not None:
        value = getattr(value, tail)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _pooled(rows: list[dict[str, Any]]) -> dict[str, Distribution | None]:
    ok = [r for r in rows if not r.get("error")]
    return {
        "ttft_s": Distribution.of([r["ttft_s"] for r in ok if r.get("ttft_s") is not None]),
        "itl_s": Distribution.of([g for r in ok for g in r.get("itl_s") or []]),
        "e2e_s": Distribution.of([r["e2e_s"] for r in ok if r.get("e2e_s") is not None]),
    }


__all__ = ["LevelFigures", "LoadRecommendation", "LoadReport", "level_figures", "max_rates"]
