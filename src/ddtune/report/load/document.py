"""The "Load levels" section of the report document, and `load_levels.csv`.

The section (inserted after "Configurations"): the recommendation per level
and for the load mix, whether the best config changes with load, the
crossover sentences, the serialisation warning, a table per level (output
tok/s, req/s, pooled TTFT/ITL/e2e percentiles, acceptance, SLO attainment and
goodput, all over repeats), the max-rate search, the plots and the methods.
See docs/report.md "How the report is built".
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from ddtune.bench.load.latency import Distribution
from ddtune.report.load.figures import LevelFigures, LoadReport
from ddtune.report.render.atomic import atomic_path
from ddtune.report.render.document import (
    Block,
    Bullets,
    Cell,
    Document,
    Image,
    Paragraph,
    Section,
    Table,
)
from ddtune.stats.intervals import format_ci

TITLE = "Load levels"


def add_load_section(document: Document, load: LoadReport | None) -> None:
    """Insert the section after "Configurations" (or at the end)."""
    if load is None:
        return
    titles = [s.title for s in document.sections]
    at = titles.index("Configurations") + 1 if "Configurations" in titles else len(titles)
    document.sections.insert(at, load_section(load))


def load_section(load: LoadReport) -> Section:
    items = [r.text for r in load.recommendations] + ([load.mix.text] if load.mix else [])
    blocks: list[Block] = [Bullets(items)]
    if load.serialisation:
        blocks.append(Bullets(load.serialisation, warning=True))
    findings = ([load.best_changes] if load.best_changes else []) + load.crossovers
    if findings:
        blocks.append(Bullets(findings))
    if load.notes:
        blocks.append(Bullets(load.notes, warning=True))
    blocks += [Table(HEADERS, [_row(load, f) for f in _ordered(load)])]
    blocks += _max_rate(load)
    blocks += [Image(p.name, p.title, p.caption) for p in load.plots]
    blocks += [Paragraph(f"Plot skipped: {note}") for note in load.skipped_plots]
    blocks.append(Bullets(METHODS))
    return Section(TITLE, blocks)


HEADERS = [
    "level",
    "config",
    "repeats",
    "output tok/s [95% CI]",
    "req/s",
    "TTFT p50 / p99 s",
    "ITL p50 / p99 s",
    "e2e p50 / p99 s",
    "acceptance",
    "SLO met",
    "goodput tok/s",
    "notes",
]
METHODS = [
    "Closed loop (cN): N clients, each sends its next request when its previous one ends. "
    "Open loop (rX): Poisson arrivals at X requests/s, the same seeded schedule for every config.",
    "Each level's warm-up requests run at the level's load and are excluded. Output tok/s and "
    "req/s are aggregates over a level's measured requests (first send to last end); goodput "
    "counts only requests meeting every SLO target (TTFT, the request's own p99 per-token gap, e2e).",
    "Per-level figures get t-intervals over repeats; latency percentiles are pooled over the "
    "requests of every repeat. ITL is per token: a chunk carrying k tokens counts k gaps of gap/k.",
    "Per level the objective is goodput tok/s under an SLO, else output tok/s (closed loop) or "
    "mean e2e latency (open loop); ties and separation follow the rules of the single-stream "
    "recommendation, per level.",
]


def _ordered(load: LoadReport) -> list[LevelFigures]:
    return sorted(load.figures, key=lambda f: (load.levels.index(f.level), f.label))


def _row(load: LoadReport, f: LevelFigures) -> list[Cell]:
    done = f.repeats - f.failed
    return [
        f.level,
        f.label,
        f"{done}/{f.repeats}",
        format_ci(f.metrics.get("output_tps")),
        _mean(f, "request_rate", 2),
        _pair(f.pooled.get("ttft_s")),
        _pair(f.pooled.get("itl_s")),
        _pair(f.pooled.get("e2e_s")),
        _mean(f, "acceptance_length", 2),
        "-" if f.mean("slo_attainment") is None else f"{f.mean('slo_attainment'):.0%}",
        format_ci(f.metrics.get("goodput_tps")) if load.slo else "-",
        _notes(f),
    ]


def _notes(f: LevelFigures) -> str:
    notes = []
    if f.failed:
        notes.append(f"failed in {f.failed} repeat(s): {f.errors[0][:120]}")
    if f.serialised:
        notes.append(f"serialised in {f.serialised} repeat(s)")
    return "; ".join(notes)


def _pair(d: Distribution | None) -> str:
    return "-" if d is None else f"{d.p50:.3f} / {d.p99:.3f}"


def _mean(f: LevelFigures, figure: str, digits: int) -> str:
    value = f.mean(figure)
    return "-" if value is None else f"{value:.{digits}f}"


def _max_rate(load: LoadReport) -> list[Block]:
    if not load.max_rate:
        return []
    rows: list[list[Cell]] = [
        [label, format_ci(ci, digits=2), "; ".join(load.max_rate_notes.get(label, []))]
        for label, ci in load.max_rate.items()
    ]
    text = "Highest request rate whose SLO attainment reached the target (max-rate search)."
    return [Paragraph(text), Table(["config", "max rate req/s [95% CI]", "search"], rows)]


def write_load_csv(load: LoadReport, path: Path) -> None:
    """One row per (level, config): every per-repeat figure's mean and interval, pooled p50/p99."""
    rows = [_csv_row(f) for f in _ordered(load)]
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(
            [{k: "" if row.get(k) is None else row[k] for k in columns} for row in rows]
        )


def _csv_row(f: LevelFigures) -> dict[str, Any]:
    row: dict[str, Any] = {"level": f.level, "label": f.label, "loop": f.loop}
    row.update(concurrency=f.concurrency, rate=f.rate, repeats=f.repeats, failed=f.failed)
    row["serialised_repeats"] = f.serialised
    for name, ci in f.metrics.items():
        row.update(
            {
                f"{name}_mean": None if ci is None else ci.mean,
                f"{name}_n": None if ci is None else ci.n,
            }
        )
        row.update(
            {
                f"{name}_low": None if ci is None else ci.low,
                f"{name}_high": None if ci is None else ci.high,
            }
        )
    for name, d in f.pooled.items():
        for q in ("p50", "p90", "p99"):
            row[f"{name.removesuffix('_s')}_{q}_s"] = None if d is None else getattr(d, q)
    return row


__all__ = ["add_load_section", "load_section", "write_load_csv"]
