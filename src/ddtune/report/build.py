"""`build_report`: trial records in, report files and a `ReportSummary` out.

    summary = build_report(records, Path("out"), ReportOptions())
    print(summary.terminal_table())

Writes into `out_dir`: report.html (self-contained), report.md, results.csv,
results.json and the PNG plots; with `[bench.load]` levels also load_levels.csv,
load_throughput.png and load_latency.png (report/load/). Every file or none: the
report is written into a hidden folder of `out_dir` and swapped in once whole
(`render/atomic.py` `staged_folder`); a report that fails leaves `out_dir` as it was.
See docs/report.md "How the report is built".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ddtune.errors import UserError
from ddtune.records import SweepContext, TrialRecord
from ddtune.report.by_slot import slot_report
from ddtune.report.conditions import condition_values, condition_warnings
from ddtune.report.load.document import add_load_section, write_load_csv
from ddtune.report.load.per_level import analyze_load
from ddtune.report.load.plots import write_load_plots
from ddtune.report.load.schedule import load_schedule_report
from ddtune.report.load.schedule_doc import add_schedule_section, write_schedule_json
from ddtune.report.lossless import check_losslessness, correctness_note, load_compare
from ddtune.report.options import ReportOptions
from ddtune.report.recommend import (
    MIX,
    Recommendation,
    best_pass_rate,
    compare_pass_rates,
    pareto_front,
    recommend,
)
from ddtune.report.render.atomic import staged_folder, write_atomic
from ddtune.report.render.html import render_html
from ddtune.report.render.markdown import render_markdown
from ddtune.report.render.plots import write_plots
from ddtune.report.render.verdict_plots import write_verdict_plots
from ddtune.report.result import ReportSummary
from ddtune.report.sections import build_document
from ddtune.report.summarize import (
    THROUGHPUT,
    ConfigSummary,
    start_variance,
    summarize_configs,
    unknown_metric_names,
)
from ddtune.report.tables import write_csv, write_json
from ddtune.report.workloads import workload_report


def build_report(
    records: Sequence[TrialRecord],
    out_dir: Path,
    options: ReportOptions | None = None,
    context: SweepContext | None = None,
) -> ReportSummary:
    """The report of `records` written into `out_dir`, every file or none (module doc)."""
    options = options or ReportOptions()
    _check_records(records)
    out_dir = _prepare_out_dir(Path(out_dir))
    summary = analyze(records, options, context)
    with staged_folder(out_dir) as stage:  # written aside, then swapped in whole
        if options.plots:
            _write_plots(summary, stage)
        if options.plots and summary.load is not None:
            summary.load.plots, summary.load.skipped_plots = write_load_plots(summary.load, stage)
        _write_files(summary, records, stage, out_dir)
    summary.files = {key: out_dir / path.name for key, path in summary.files.items()}
    return summary


def _write_plots(summary: ReportSummary, out_dir: Path) -> None:
    """The verdict's plots (forest, race) first, then the per-config ones."""
    rec = summary.recommendations[0] if summary.recommendations else None
    tolerance = summary.options.tolerance
    verdict: tuple[str, str | None, float, str] = (THROUGHPUT, None, tolerance, "")
    if rec is not None:
        word = "leading" if rec.status == "inconclusive" else "run this"
        verdict = (rec.metric, rec.label, tolerance, word)
    plots, skipped = write_verdict_plots(summary.configs, summary.context, verdict, out_dir)
    more, more_skipped = write_plots(summary.configs, out_dir)
    summary.plots, summary.skipped_plots = plots + more, skipped + more_skipped


def analyze(
    records: Sequence[TrialRecord], options: ReportOptions, context: SweepContext | None = None
) -> ReportSummary:
    """Every statistic and decision of the report, without writing anything."""
    configs = summarize_configs(records, options.confidence, options.passes_per_start)
    baselines = [s.label for s in configs if s.is_baseline]
    baseline = baselines[0] if baselines else None
    by_label: dict[str, list[TrialRecord]] = {}
    for record in records:
        by_label.setdefault(record.label, []).append(record)
    lossless = check_losslessness(by_label, baseline, load_compare(), options.near_tie_gap)
    pass_rates = compare_pass_rates(configs, options.alpha)
    best = best_pass_rate(configs)
    notes = [f"{n} of {len(records)} trials did not complete" for n in [_unfinished(records)] if n]
    if best is None:
        notes.append(
            "coding pass rate not measured: the throughput recommendation ignores correctness"
        )
    summary = ReportSummary(
        options=options,
        configs=configs,
        baseline=baseline,
        pass_rates=pass_rates,
        best_pass_rate=None if best is None else best.label,
        lossless=lossless,
        correctness_notes={},
        pareto=pareto_front(configs),
        recommendations=recommend(
            configs, pass_rates, options, _race(context), context.verdict if context else None
        ),
        conditions=condition_values(records),
        warnings=_warnings(records, baselines),
        notes=notes,
        context=context or SweepContext(),
        variance=start_variance(records, options.passes_per_start),
    )
    if best is not None:
        summary.correctness_notes = _correctness_notes(summary, best, options.alpha)
    summary.slots = slot_report(records, options.confidence, options.tolerance)
    if summary.slots is not None:  # trials ran on several service slots
        summary.warnings += summary.slots.warnings
        summary.notes += summary.slots.notes
    headline = _headline(summary.context, summary.recommendations)
    summary.recommendations.sort(
        key=lambda r: r.objective != headline
    )  # the sweep's objective first
    summary.load = analyze_load(records, configs, pass_rates, options)  # [bench.load] levels
    if summary.load is not None:  # the config per range of concurrent requests
        summary.schedule = load_schedule_report(summary.load, configs, options)
    summary.workloads = workload_report(summary)  # bench suites / traffic, and the mix
    return summary


def _headline(context: SweepContext, recommendations: Sequence[Recommendation] = ()) -> str:
    """The recommendation the sweep's objective maps to (speedup ranks as throughput); the
    mix's when that objective has no data (a bench of suites without the bundled one)."""
    objective = "throughput" if context.objective == "speedup" else context.objective
    by_objective = {r.objective: r for r in recommendations}
    own = by_objective.get(objective)
    if (own is None or own.status == "no data") and MIX in by_objective:
        return MIX
    return objective


def _race(context: SweepContext | None) -> tuple[str, list[str]] | None:
    """(the race's objective, the configs it eliminated), for `recommend`."""
    if context is None or not context.race:
        return None
    return _headline(context), [e.label for e in context.exits]


def _correctness_notes(summary: ReportSummary, best: ConfigSummary, alpha: float) -> dict[str, str]:
    notes = {}
    best_rate = None if best.coding is None else best.coding.rate
    for s in summary.configs:
        if s.coding is None or s is best or s.coding.rate == best_rate:
            continue
        comparison = summary.pass_rates.get(s.label)
        p = None if comparison is None else comparison.p_value
        notes[s.label] = correctness_note(
            summary.lossless.get(s.label), summary.lossless.get(best.label), p, alpha
        )
    return notes


def _warnings(records: Sequence[TrialRecord], baselines: list[str]) -> list[str]:
    warnings = condition_warnings(records)
    if len(baselines) > 1:
        warnings.append(
            f"several baseline configs ({', '.join(baselines)}); ratios use {baselines[0]}"
        )
    unknown = unknown_metric_names(records)
    if unknown:
        warnings.append(f"unknown metric(s) {', '.join(unknown)} are not part of the report")
    unsafe = sorted({r.conditions.get("sandbox") or "" for r in records} - {""})
    warnings += [
        f"coding tests were not isolated: {note} (pass rates come from model-written code "
        "that could reach the machine)"
        for note in unsafe
        if note.startswith("NO NAMESPACES")
    ]
    return warnings


def _write_files(
    summary: ReportSummary, records: Sequence[TrialRecord], out_dir: Path, links_from: Path
) -> None:
    """The documents and tables into `out_dir` (the stage); links relative to `links_from`
    (the folder the report is read from)."""
    document = build_document(summary, links_from)
    add_load_section(document, summary.load)
    add_schedule_section(document, summary.schedule)
    files = {
        "markdown": out_dir / "report.md",
        "html": out_dir / "report.html",
        "csv": out_dir / "results.csv",
        "json": out_dir / "results.json",
    }
    write_atomic(files["markdown"], render_markdown(document))
    write_atomic(files["html"], render_html(document, out_dir))
    write_csv(summary, files["csv"])
    summary.files = files | {plot.name: out_dir / plot.name for plot in summary.plots}
    if summary.load is not None:
        write_load_csv(summary.load, out_dir / "load_levels.csv")
        summary.files["load_csv"] = out_dir / "load_levels.csv"
        summary.files |= {plot.name: out_dir / plot.name for plot in summary.load.plots}
    if summary.schedule is not None:
        write_schedule_json(summary.schedule, out_dir / "schedule.json")
        summary.files["schedule"] = out_dir / "schedule.json"
    write_json(summary, records, files["json"])


def _check_records(records: Sequence[TrialRecord]) -> None:
    if not records:
        raise UserError("no trial records to report: run the sweep first (ddtune sweep run)")
    bad = [type(r).__name__ for r in records if not isinstance(r, TrialRecord)]
    if bad:
        raise UserError(f"build_report needs TrialRecord items; got {', '.join(sorted(set(bad)))}")


def _prepare_out_dir(out_dir: Path) -> Path:
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(
            f"report output {out_dir} exists and is not a directory; choose another --out"
        )
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create report directory {out_dir}: {exc.strerror}") from None
    return out_dir


def _unfinished(records: Sequence[TrialRecord]) -> int:
    return sum(1 for r in records if r.status != "done")
