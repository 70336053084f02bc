"""The answer atop the report: which config to run, how much faster, how sure, how to apply it.

    answer = headline(summary)
    answer.lines[0].text     # "Run ddtree b16 k4 w64: 268 tok/s, 1.88x AR [1.71, 2.06];
                             #  within 5% of ddtree b16 k8 w64, the cheaper of the two"
                             #  (.main: "Run ddtree b16 k4 w64", .detail: the rest)
    answer.lines[0].status   # "a tie within 5%" | "decided" | "not decided yet: about 6
                             #  more passes would decide"
    answer.command           # "ddtune sweep apply --store runs/x/store.sqlite --config '...'"

One line per objective, the sweep's own first (`summary.recommendations` is in
that order). The words come from the verdicts of `recommend.py` (separated /
equivalent / inconclusive); the evidence stays in the sections below the answer.
See docs/report.md.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from ddtune.report.recommend import Recommendation, name_list
from ddtune.report.result import ReportSummary
from ddtune.report.summarize import ConfigSummary

OBJECTIVE_WORDS = {
    "throughput": "Throughput",
    "long_context": "Long context",
    "short_context": "Short context",
    "mix": "Traffic mix",
}  # a workload's own line is titled by its name ("humaneval")
TONES = {"separated": "decided", "equivalent": "tie", "inconclusive": "open", "no data": "open"}


@dataclass
class AnswerLine:
    objective: str  # "throughput" | "long_context" | "short_context"
    title: str  # "Throughput"
    label: str | None  # the config to run (the leader while not decided)
    main: str  # "Run X"
    detail: str  # "268 tok/s, 1.88x AR [1.71, 2.06]; within 5% of Y, the cheaper of the two"
    status: str  # in words people use
    tone: str  # "decided" | "tie" | "open"

    @property
    def text(self) -> str:
        return f"{self.main}: {self.detail}" if self.detail else self.main


@dataclass
class Answer:
    lines: list[AnswerLine]
    command: str | None  # applies the first line's config; None without a store
    command_caption: str


def headline(summary: ReportSummary) -> Answer:
    """The answer lines and the command that applies the sweep objective's config."""
    lines = [_line(summary, rec) for rec in summary.recommendations]
    first = lines[0] if lines else None
    store = summary.context.store
    if first is None or first.label is None or store is None:
        return Answer(lines, None, "")
    command = f"ddtune sweep apply --store {shlex.quote(store)} --config {shlex.quote(first.label)}"
    caption = (
        "Apply it (it becomes the service's lasting configuration):"
        if first.tone != "open"
        else "Apply the leading config anyway (not decided yet):"
    )
    return Answer(lines, command, caption)


def _line(summary: ReportSummary, rec: Recommendation) -> AnswerLine:
    title = OBJECTIVE_WORDS.get(rec.objective, rec.objective.removeprefix("workload:"))
    tone = TONES.get(rec.status, "open")
    if rec.label is None:
        return AnswerLine(rec.objective, title, None, "No measurements yet", "", "no data", tone)
    chosen = summary.config(rec.label)
    main = f"{'Run' if rec.status != 'inconclusive' else 'Leaning'} {rec.label}"
    detail = _value(summary, chosen, rec.metric) + _versus(summary, rec)
    return AnswerLine(rec.objective, title, rec.label, main, detail, _status(summary, rec), tone)


def _value(summary: ReportSummary, s: ConfigSummary, metric: str) -> str:
    """'268 tok/s, 1.88x AR [1.71, 2.06]' (the ratio to the baseline, when there is one)."""
    value = f"{s.ci(metric).mean:.0f} tok/s"
    if s.is_baseline:
        return value + " (the baseline)"
    ratio = s.ratios.get(metric)
    if ratio is None or summary.baseline is None:
        return value
    interval = f" [{ratio.low:.2f}, {ratio.high:.2f}]" if ratio.has_interval else ""
    return f"{value}, {ratio.mean:.2f}× {baseline_name(summary)}{interval}"


def baseline_name(summary: ReportSummary) -> str:
    """'AR' for an autoregressive baseline, else its label."""
    if summary.baseline is None:
        return "baseline"
    base = summary.config(summary.baseline)
    return "AR" if base.params.mode == "ar" else base.label


def _versus(summary: ReportSummary, rec: Recommendation) -> str:
    """How the config stands against the others, in a few words."""
    tol = f"{summary.options.tolerance:.0%}"
    if rec.status == "equivalent":
        others = [x for x in [rec.leader or "", *rec.equivalent] if x and x != rec.label]
        n = len(others) + 1
        fastest = rec.label == rec.leader
        if n == 2:
            which = "the faster and cheaper of the two" if fastest else "the cheaper of the two"
        else:
            which = (
                f"the fastest and cheapest of the {n}" if fastest else f"the cheapest of the {n}"
            )
        return f"; within {tol} of {name_list(others, shown=3)}, {which}"
    if rec.status == "separated" and rec.runner_up and rec.runner_up_ratio:
        ahead = f"{rec.runner_up_ratio - 1:.0%}"
        return f"; ahead of every other config (the nearest, {rec.runner_up}, by {ahead})"
    if rec.status == "separated" and rec.left_race:
        return "; the one config left in the race"
    if rec.status == "inconclusive":
        return f"; not yet separated from {name_list(rec.contenders, shown=3)}"
    return ""


def _status(summary: ReportSummary, rec: Recommendation) -> str:
    if rec.status == "separated":
        return "decided"
    if rec.status == "equivalent":
        return f"a tie within {summary.options.tolerance:.0%}"
    if rec.status != "inconclusive":
        return rec.status
    if rec.more_passes is not None:
        passes = "pass" if rec.more_passes == 1 else "passes"
        return f"not decided yet: about {rec.more_passes} more {passes} would decide"
    if rec.leader is None or summary.config(rec.leader).done < 2:
        return "not decided yet: run at least 2 passes per config"
    return "not decided yet: too close to settle with a practical number of passes"
