"""The sweep report: statistics, Pareto front, recommendations, plots, HTML/Markdown/CSV/JSON.

from ddtune.report import build_report, ReportOptions
summary = build_report(records, out_dir, ReportOptions())   # records: list[TrialRecord]
print(summary.terminal_table())
summary.recommendations
See docs/architecture.md "Report".
"""

from ddtune.report.build import analyze, build_report
from ddtune.report.inputs import METRIC_NAMES, TrialRecord
from ddtune.report.options import ReportOptions
from ddtune.report.result import ReportSummary

__all__ = [
    "METRIC_NAMES",
    "ReportOptions",
    "ReportSummary",
    "TrialRecord",
    "analyze",
    "build_report",
]
