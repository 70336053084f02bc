"""The sweep report: statistics, Pareto front, recommendations, plots, HTML/Markdown/CSV/JSON.

from ddtune.report import build_report, ReportOptions
summary = build_report(records, out_dir, ReportOptions())   # records: list[ddtune.records.TrialRecord]
print(summary.terminal_table())
summary.recommendations
See docs/report.md "How the report is built".
"""

from ddtune.report.build import analyze, build_report
from ddtune.report.options import ReportOptions
from ddtune.report.result import ReportSummary

__all__ = [
    "ReportOptions",
    "ReportSummary",
    "analyze",
    "build_report",
]
