"""What the report says, section by section: `build_document(summary)` as a neutral `Document`.

The renderers (`render/markdown.py`, `render/html.py`) turn the one document
into Markdown and HTML, so both carry the same content. See
docs/report.md "How the report is built".
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from ddtune.report.conditions import CONDITION_NAMES
from ddtune.report.headline import headline
from ddtune.report.options import Interleave
from ddtune.report.predicted import predicted_section
from ddtune.report.render.document import (
    Block,
    Bullets,
    Cell,
    Code,
    Document,
    Image,
    Lead,
    LeadItem,
    Link,
    Paragraph,
    Section,
    Table,
)
from ddtune.report.render.verdict_plots import FOREST, RACE
from ddtune.report.result import ReportSummary
from ddtune.report.summarize import THROUGHPUT, ConfigSummary
from ddtune.report.workloads import workload_section
from ddtune.stats.intervals import MeanCI, format_ci


def build_document(summary: ReportSummary, out_dir: Path) -> Document:
    sections = [
        answer_section(summary),
        workload_section(summary),
        _recommendations(summary),
        race_section(summary),
        predicted_section(summary),
        _configurations(summary),
        _variance(summary),
        Section("Plots", _plots(summary)),
        _correctness(summary),
        _acceptance(summary),
        _failures(summary, out_dir),
        _conditions(summary),
        _slots(summary),
        _methods(summary),
    ]
    return Document(summary.options.title, [s for s in sections if s.blocks])


def answer_section(summary: ReportSummary) -> Section:
    """The answer first: one line per objective, the command that applies it, the forest plot."""
    answer = headline(summary)
    items = [
        LeadItem(line.title, line.main, line.detail, line.status, line.tone)
        for line in answer.lines
    ]
    blocks: list[Block] = [Lead(items)]
    if summary.workloads is not None:  # one config for every workload, or who loses how much
        blocks.append(Paragraph(summary.workloads.finding))
    if answer.command is not None:
        blocks.append(Code(answer.command, answer.command_caption))
    blocks += [Image(p.name, p.title, p.caption) for p in summary.plots if p.name == FOREST]
    blocks.append(Paragraph("The evidence for each line is below, section by section."))
    return Section("Answer", blocks)


def _recommendations(summary: ReportSummary) -> Section:
    items = [f"{r.description} — {r.status.upper()}: {r.text}" for r in summary.recommendations]
    blocks: list[Block] = []
    if summary.warnings:
        blocks.append(Bullets([f"Warning: {w}" for w in summary.warnings], warning=True))
    blocks.append(Bullets(items))
    if summary.pareto:
        blocks.append(
            Paragraph(
                "Pareto front over (short tok/s, long tok/s, pass rate): "
                + ", ".join(summary.pareto)
            )
        )
    if summary.baseline is None:
        blocks.append(
            Paragraph("No baseline (AR) config in this sweep: no ratios to the baseline.")
        )
    if summary.notes:
        blocks.append(Bullets(summary.notes))
    return Section("Recommendations", blocks)


def _configurations(summary: ReportSummary) -> Section:
    level = f"{summary.options.confidence:.0%}"
    headers = [
        "config",
        "repeats done",
        f"short tok/s [{level} CI]",
        "x baseline",
        f"long tok/s [{level} CI]",
        "x baseline",
        f"throughput tok/s [{level} CI]",
        "x baseline",
        f"acceptance length [{level} CI]",
        "pass rate [Wilson]",
        "T=0 outputs",
        "Pareto",
    ]
    rows = [_config_row(summary, s) for s in summary.configs]
    notes = [f"{s.label}: {n}" for s in summary.configs for n in s.notes]
    blocks: list[Block] = [Table(headers, rows)]
    if notes:
        blocks.append(Bullets(notes))
    blocks.append(
        Paragraph(
            "n=1 means a single completed repeat: no interval can be given; run more repeats."
        )
    )
    return Section("Configurations", blocks)


def _config_row(summary: ReportSummary, s: ConfigSummary) -> list[Cell]:
    verdict = summary.lossless.get(s.label)
    return [
        s.label + (" (baseline)" if s.is_baseline else ""),
        f"{s.done}/{s.trials}",
        format_ci(s.metrics.get("short_tps")),
        _ratio(s, "short_tps"),
        format_ci(s.metrics.get("long_tps")),
        _ratio(s, "long_tps"),
        format_ci(s.metrics.get(THROUGHPUT)),
        _ratio(s, THROUGHPUT),
        format_ci(s.metrics.get("acceptance_length"), digits=2),
        _coding(s),
        "-" if verdict is None else verdict.status,
        "yes" if s.label in summary.pareto else "",
    ]


def _correctness(summary: ReportSummary) -> Section:
    rows: list[list[Cell]] = []
    for s in summary.configs:
        comparison = summary.pass_rates.get(s.label)
        versus = (
            "best pass rate"
            if s.label == summary.best_pass_rate
            else (comparison.text if comparison else "-")
        )
        verdict = summary.lossless.get(s.label)
        rows.append(
            [
                s.label,
                _coding(s),
                versus,
                summary.correctness_notes.get(s.label, ""),
                "-" if verdict is None else verdict.text,
            ]
        )
    headers = [
        "config",
        "pass rate [Wilson]",
        "vs best (Fisher exact, two-sided)",
        "difference is",
        "T=0 vs baseline",
    ]
    text = (
        "Every mode is lossless: at T=0 each config must produce the baseline's text. A pass-rate "
        "difference between configs is therefore divergence or noise, never a trade-off. "
        "Where outputs part, the top-1 minus top-2 logprob there classifies it: near-tie below "
        f"{summary.options.near_tie_gap:g} nats (GPU numerics can flip a near-tie without a "
        "bug), else divergence (a bug or a lossy mode); unclassified without gap data."
    )
    return Section("Correctness and losslessness", [Paragraph(text), Table(headers, rows)])


def _plots(summary: ReportSummary) -> list[Block]:
    images: list[Block] = [
        Image(p.name, p.title, p.caption) for p in summary.plots if p.name not in (FOREST, RACE)
    ]
    return images + [Paragraph(f"Plot skipped: {note}") for note in summary.skipped_plots]


def _acceptance(summary: ReportSummary) -> Section:
    rows: list[list[Cell]] = []
    for s in summary.configs:
        a = s.acceptance
        if a is not None:
            quartiles: list[Cell] = [
                f"{v:.2f}" for v in (a.minimum, a.p25, a.median, a.p75, a.maximum)
            ]
            rows.append([s.label, str(a.n), *quartiles])
    if not rows:
        return Section(
            "Acceptance length distribution",
            [Paragraph("No per-request acceptance lengths recorded.")],
        )
    headers = ["config", "requests", "min", "25%", "median", "75%", "max"]
    return Section("Acceptance length distribution", [Table(headers, rows)])


def _failures(summary: ReportSummary, out_dir: Path) -> Section:
    rows: list[list[Cell]] = []
    for s in summary.configs:
        for f in s.failures:
            link: Cell = (
                "-" if not f.log_tail_path else Link("log tail", _href(f.log_tail_path, out_dir))
            )
            rows.append(
                [
                    s.label,
                    str(f.trial_id),
                    str(f.repeat),
                    f.status,
                    f.failure or "-",
                    str(f.attempts),
                    (f.detail or "")[:200],
                    link,
                ]
            )
    if not rows:
        return Section("Failures", [Paragraph("No failed or unfinished trials.")])
    headers = ["config", "trial", "repeat", "status", "class", "attempts", "detail", "log"]
    return Section("Failures", [Table(headers, rows)])


def _conditions(summary: ReportSummary) -> Section:
    rows: list[list[Cell]] = [
        [CONDITION_NAMES.get(key, key), "; ".join(values)]
        for key, values in summary.conditions.items()
    ]
    blocks: list[Block] = [Table(["condition", "values over completed trials"], rows)]
    if summary.warnings:
        blocks.append(Bullets(summary.warnings, warning=True))
    else:
        blocks.append(Paragraph("All completed trials ran under the same recorded conditions."))
    return Section("Conditions", blocks)


def _slots(summary: ReportSummary) -> Section:
    """Per service slot (ray backend); no section when the trials name no slot."""
    report = summary.slots
    if report is None:
        return Section("Slots", [])
    headers = ["slot", "node", "trials", "tok/s vs config mean", "hardware", "flag"]
    rows: list[list[Cell]] = [
        [
            s.slot,
            ", ".join(s.nodes) or "-",
            str(s.trials),
            s.percent(),
            "; ".join(s.fingerprints),
            "systematically slower" if s.slower else "",
        ]
        for s in report.slots
    ]
    blocks: list[Block] = [Table(headers, rows)]
    blocks.append(Bullets(report.notes or ["Every pass ran on one slot."]))
    return Section("Slots", blocks)


def race_section(summary: ReportSummary) -> Section:
    ctx = summary.context
    if not ctx.race and not ctx.notes:
        return Section("Race", [])
    blocks: list[Block] = [Bullets(list(ctx.notes))] if ctx.notes else []
    if ctx.race:
        stop = STOP_WORDS.get(ctx.stop or "", "still running")
        blocks.append(
            Paragraph(f"Strategy {ctx.strategy}: {ctx.passes} pass(es), stopped: {stop}.")
        )
        blocks.append(_race_table(summary, stop))
        blocks += [Image(p.name, p.title, p.caption) for p in summary.plots if p.name == RACE]
    return Section("Race", blocks)


def _race_table(summary: ReportSummary, stop: str) -> Table:
    """Who left when and why; a restart-bound race also says each config's starts and benches."""
    ctx = summary.context
    rows: list[list[Cell]] = [
        [e.label, str(e.at_pass), e.reason, e.detail]
        for e in sorted(ctx.exits, key=lambda e: e.at_pass)
    ]
    stayed = f"in the race when it stopped ({stop})" if ctx.efforts else ""
    rows += [
        [s.label, "-", "stayed", stayed] for s in summary.configs if ctx.exit_of(s.label) is None
    ]
    headers = ["config", "left at pass", "why", "detail"]
    if not ctx.efforts:
        return Table(headers, rows)
    for row in rows:
        starts, benches = ctx.efforts.get(str(row[0]), (0, 0))
        row[1:1] = [str(starts), str(benches)]
    return Table(["config", "starts", "benches", *headers[1:]], rows)


STOP_WORDS = {
    "one_left": "one contender left",
    "equivalent": "the remaining contenders are equivalent within the tolerance",
    "max_passes": "the maximum passes (`repeats`) ran",
    "max_trials": "`max_trials` reached",
    "max_hours": "`max_hours` reached",
    "futile": "undecided, and the passes left could not decide it at the gaps and spread measured",
}


def _variance(summary: ReportSummary) -> Section:
    if not summary.variance:
        return Section("Variance components", [])
    rows: list[list[Cell]] = [
        [
            label,
            str(vc.groups),
            f"{math.sqrt(vc.between):.1%}",
            f"{math.sqrt(vc.within):.1%}",
            f"{vc.between_share:.0%}",
        ]
        for label, vc in summary.variance.items()
    ]
    text = (
        f"{summary.options.passes_per_start} passes per server start: spread of log throughput "
        "between starts vs within one start (one-way random effects). A large between-start share "
        "is what reusing a start hides: the analysis averages each start's benches into one value."
    )
    return Section(
        "Variance components",
        [
            Paragraph(text),
            Table(
                ["config", "starts", "between starts (sd)", "within a start (sd)", "between share"],
                rows,
            ),
        ],
    )


def _methods(summary: ReportSummary) -> Section:
    o = summary.options
    return Section(
        "Methods",
        [
            Bullets(
                [
                    f"Means over completed repeats with {o.confidence:.0%} Student-t intervals; n=1 gets no interval.",
                    "Ratio to the baseline: ratio of mean tok/s with Fieller's interval (independent samples, "
                    "Welch-Satterthwaite degrees of freedom); none when either side has n=1.",
                    "Throughput: per repeat, the geometric mean of short and long tok/s (both must be measured).",
                    f"Pass rates pooled over repeats with {o.confidence:.0%} Wilson intervals; each config against the "
                    f"best by Fisher's exact test (two-sided, significant at p < {o.alpha:g}).",
                    _comparison_method(o.blocked, o.interleave),
                    f"Separated: the {o.confidence:.0%} interval of leader/config excludes 1. Equivalent: the "
                    f"{1 - 2 * o.alpha:.0%} interval lies inside [1/(1+{o.tolerance:g}), 1+{o.tolerance:g}] (two "
                    "one-sided tests); the cheapest of the leader and its equivalents (ar, then dflash, then "
                    "ddtree; then smaller budget, topk and window) is recommended. Otherwise inconclusive.",
                    f"Passes needed: exact power of a paired t-test ({o.power:.0%} power, alpha {o.alpha:g}) at "
                    "the observed ratio and spread of the per-pass log ratios.",
                ]
            )
        ],
    )


def _comparison_method(blocked: bool, interleave: Interleave) -> str:
    if blocked:
        inside = (
            " Inside each pass the configs took turns request by request (interleave = "
            '"request"; each response\'s system_fingerprint names the config it ran under), so '
            "drift within a pass lands on every config alike too."
            if interleave == "request"
            else ""
        )
        return (
            "Comparisons are paired by pass (interleaved order, shuffled inside each pass: a "
            "randomised complete block design): the t-interval of the mean per-pass log ratio, so "
            "drift between passes cancels; Welch on the logs where two configs share fewer than 2 "
            "passes." + inside
        )
    return (
        "Comparisons use Welch's t on the logs (independent samples): the order is not interleaved, "
        "so passes are not blocks."
    )


def _ratio(s: ConfigSummary, metric: str) -> str:
    ratio: MeanCI | None = s.ratios.get(metric)
    if s.is_baseline:
        return "1 (baseline)"
    if ratio is None:
        return "-"
    if not ratio.has_interval:
        return f"{ratio.mean:.2f}x"
    return f"{ratio.mean:.2f}x [{ratio.low:.2f}, {ratio.high:.2f}]"


def _coding(s: ConfigSummary) -> str:
    c = s.coding
    if c is None:
        return "not measured"
    return f"{c.passed}/{c.total} = {c.rate:.0%} [{c.low:.0%}, {c.high:.0%}]"


def _href(path: str, out_dir: Path) -> str:
    """A link relative to the report when possible, so the directory can be moved."""
    target = Path(path)
    if not target.is_absolute():
        return target.as_posix()
    try:
        return Path(os.path.relpath(target, out_dir.resolve())).as_posix()
    except ValueError:  # another drive on Windows
        return target.as_uri()
