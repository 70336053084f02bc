"""The live page: a `LiveState` as a report `Document`, and the page around it.

    live_document(state, report_dir)  # sections: Now, Answer so far, Configurations,
                                      # Race so far, Failures, Slots, Report files
    fragment_html(state, report_dir)  # those sections as HTML (what the page polls)
    page_html(state, report_dir, interval_s)   # the whole page, refreshing itself

The page fetches `live` every `interval_s` seconds and swaps it in (no reload,
no flicker, the scroll position kept); without JavaScript it reloads itself.
Plots are the report folder's PNGs, linked (not embedded) with their mtime so
a rewritten plot is fetched again. See docs/watch.md.
"""

from __future__ import annotations

import time
from html import escape
from pathlib import Path

from ddtune.report.headline import baseline_name
from ddtune.report.predicted import TITLE as PREDICTED
from ddtune.report.predicted import predicted_section
from ddtune.report.render.document import (
    Block,
    Bullets,
    Cell,
    Code,
    Document,
    Image,
    Link,
    Paragraph,
    Section,
    Table,
)
from ddtune.report.render.html import STYLE, render_sections
from ddtune.report.render.verdict_plots import FOREST, RACE, TITLES
from ddtune.report.sections import answer_section, race_section
from ddtune.report.workloads import workload_section
from ddtune.sweep.plan.costs import format_duration
from ddtune.sweep.watch.state import LiveState

CAPTIONS = {FOREST: "ratio to the baseline, sorted", RACE: "x: the pass a config left, and why"}
REPORT_FILES = ("report.html", "report.md", "results.csv", "results.json")


def live_document(state: LiveState, report_dir: Path) -> Document:
    sections = [
        _now(state),
        _answer(state, report_dir),
        _workloads(state),
        _configurations(state),
        _race(state, report_dir),
        _predicted(state),
        _failures(state),
        _slots(state),
        _files(report_dir),
    ]
    return Document(f"ddtune sweep watch: {state.sweep}", [s for s in sections if s.blocks])


def fragment_html(state: LiveState, report_dir: Path) -> str:
    def image_src(file: str) -> str:
        version = int((report_dir / file).stat().st_mtime)
        return f"report/{file}?v={version}"

    return render_sections(live_document(state, report_dir).sections, image_src)


def _now(state: LiveState) -> Section:
    counts = ", ".join(f"{n} {status}" for status, n in state.counts.items() if n)
    blocks: list[Block] = [
        Paragraph(f"Sweep {state.sweep} ({state.strategy}): {state.phase_text}"),
        Bullets(
            [
                f"trials: {counts or 'none yet'}; passes finished: {state.passes}",
                f"ETA: {state.eta}" if state.eta else "ETA: nothing left to run",
                f"store: {state.store} (read only)",
            ]
        ),
    ]
    if state.now:
        rows: list[list[Cell]] = [
            [
                f"{t.label} r{t.repeat}",
                str(t.attempt),
                format_duration(max(state.read_at - t.started_at, 0.0)),
                t.slot or "-",
                t.phase or "-",
            ]
            for t in state.now
        ]
        blocks.append(Table(["running now", "attempt", "for", "slot", "phase"], rows))
    return Section("Now", blocks)


def _answer(state: LiveState, report_dir: Path) -> Section:
    if state.summary is None:
        return Section("Answer so far", [Paragraph(f"No answer yet: {state.analysis_error}.")])
    section = answer_section(state.summary)
    section.title = "Answer so far"
    blocks = section.blocks[:-1]  # all but "the evidence is below"
    return Section(section.title, blocks + _plot_blocks(report_dir, FOREST))


def _configurations(state: LiveState) -> Section:
    summary = state.summary
    base = "baseline" if summary is None else baseline_name(summary)
    rows: list[list[Cell]] = []
    for c in sorted(state.configs, key=lambda c: _rank(state, c.label)):
        s = (
            None
            if summary is None
            else next((x for x in summary.configs if x.label == c.label), None)
        )
        ci = None if s is None else s.metrics.get("throughput_tps")
        ratio = None if s is None else s.ratios.get("throughput_tps")
        rows.append(
            [
                c.label + (" (baseline)" if c.is_baseline else ""),
                c.state,
                f"{c.done}/{c.trials}" + (f", {c.failed} failed" if c.failed else ""),
                "-" if ci is None else f"{ci.mean:.1f}",
                "1" if c.is_baseline else ("-" if ratio is None else f"{ratio.mean:.2f}×"),
            ]
        )
    headers = ["config", "state", "trials done", "throughput tok/s", f"× {base}"]
    return Section("Configurations", [Table(headers, rows)])


def _rank(state: LiveState, label: str) -> tuple[bool, float]:
    """Configs still in the race first, then the fastest first."""
    summary = state.summary
    if summary is None:
        return (False, 0.0)
    s = next((x for x in summary.configs if x.label == label), None)
    mean = None if s is None else s.mean("throughput_tps")
    return (summary.context.exit_of(label) is not None, -(mean or 0.0))


def _workloads(state: LiveState) -> Section:
    """Per workload (bench suites, traffic) so far: tok/s, τ and pass rate per config."""
    if state.summary is None:
        return Section("Workloads so far", [])
    return Section("Workloads so far", workload_section(state.summary).blocks)


def _predicted(state: LiveState) -> Section:
    """A trace's predictions beside the measurements so far (`[sweep] trace`)."""
    if state.summary is None:
        return Section(PREDICTED, [])
    return Section(f"{PREDICTED} so far", predicted_section(state.summary).blocks)


def _race(state: LiveState, report_dir: Path) -> Section:
    if state.summary is None or not state.summary.context.race:
        return Section("Race so far", [])
    section = race_section(state.summary)
    blocks: list[Block] = [b for b in section.blocks if not isinstance(b, Image)]
    return Section("Race so far", blocks + _plot_blocks(report_dir, RACE))


def _failures(state: LiveState) -> Section:
    if not state.failures:
        return Section("Failures", [Paragraph("No failed or interrupted attempt.")])
    blocks: list[Block] = []
    for f in state.failures:
        head = f"trial {f.trial_id} {f.label} r{f.repeat}, attempt {f.attempt}: {f.state}"
        caption = f"{head} — {f.failure}: {f.detail}" + (f" (log: {f.log})" if f.log else "")
        blocks.append(Code(f.tail or "(no log)", caption))
    return Section("Failures", blocks)


def _slots(state: LiveState) -> Section:
    if not state.slots:
        return Section("Slots", [])
    rows: list[list[Cell]] = [
        [
            s["name"],
            s["state"],
            s["node"] or "",
            f"{s['trial_id']} {s['label']} r{s['repeat']}" if s["trial_id"] else "",
            s["phase"] or "",
            str(s["done"]),
            s["detail"] or "",
            f"{max(state.read_at - s['updated_at'], 0):.0f} s ago",
        ]
        for s in state.slots
    ]
    headers = ["slot", "state", "node", "trial", "phase", "done", "detail", "updated"]
    return Section("Slots", [Table(headers, rows)])


def _files(report_dir: Path) -> Section:
    present = [name for name in REPORT_FILES if (report_dir / name).is_file()]
    if not present:
        return Section("Report", [Paragraph("The report folder is written after the first pass.")])
    written = time.strftime("%H:%M:%S", time.localtime((report_dir / present[0]).stat().st_mtime))
    rows: list[list[Cell]] = [[Link(name, f"report/{name}")] for name in present]
    text = f"The full report, rewritten after every pass (last at {written}): {report_dir}"
    return Section("Report", [Paragraph(text), Table(["file"], rows)])


def _plot_blocks(report_dir: Path, name: str) -> list[Block]:
    if not (report_dir / name).is_file():
        return []
    caption = CAPTIONS[name] + " (from the report, rewritten after every pass)"
    return [Image(name, TITLES[name], caption)]


LIVE_STYLE = """
#bar { position: sticky; top: 0; background: #ffffffee; padding: .3em 0; font-size: 13px;
       color: #57606a; border-bottom: 1px solid #d0d7de; }
#bar.stale { color: #b35900; }
h1 { margin-bottom: .2em; }
"""

SCRIPT = """
const live = document.getElementById("live"), bar = document.getElementById("bar");
let last = live.innerHTML;
async function refresh() {
  try {
    const response = await fetch("live", {cache: "no-store"});
    if (!response.ok) throw new Error("HTTP " + response.status);
    const html = await response.text();
    if (html !== last) { live.innerHTML = html; last = html; }
    bar.textContent = "live: updated " + new Date().toLocaleTimeString() + EVERY;
    bar.className = "";
  } catch (error) {
    bar.textContent = "cannot reach ddtune sweep watch (" + error.message + "); retrying" + EVERY;
    bar.className = "stale";
  }
}
setInterval(refresh, INTERVAL_MS);
"""


def page_html(state: LiveState, report_dir: Path, interval_s: float) -> str:
    """The whole page; it polls `live` every `interval_s` seconds."""
    title = escape(f"ddtune sweep watch: {state.sweep}")
    every = f" · refreshes every {interval_s:g} s"
    script = SCRIPT.replace("INTERVAL_MS", str(int(interval_s * 1000))).replace(
        "EVERY", repr(every)
    )
    stamp = time.strftime("%H:%M:%S", time.localtime(state.read_at))
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">',
            f'<noscript><meta http-equiv="refresh" content="{max(int(interval_s), 1)}"></noscript>',
            f"<title>{title}</title><style>{STYLE}{LIVE_STYLE}</style></head><body>",
            f"<h1>{title}</h1>",
            f'<div id="bar">live: updated {stamp}{escape(every)}</div>',
            f'<div id="live">{fragment_html(state, report_dir)}</div>',
            f"<script>{script}</script>",
            "</body></html>",
        ]
    )
