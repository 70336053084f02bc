"""Read-only views of a store: the status table, CSV/JSON export, and the report hand-off.

Everything here reads `TrialRecord`s (`Store.trial_records`); parameters appear
in their wire form (`TrialRecord.config`). See docs/architecture.md "Sweep".
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ddtune.report.inputs import METRIC_NAMES, TrialRecord
from ddtune.sweep.store import TRIAL_STATUSES, Store

if TYPE_CHECKING:
    from ddtune.report.result import ReportSummary

STATUS_STYLE = {
    "done": "green",
    "failed": "red",
    "interrupted": "yellow",
    "running": "cyan",
    "pending": "dim",
}


def status_table(store: Store, sweep: sqlite3.Row) -> Group:
    """Counts per status, one row per trial, and every failure with its log path."""
    records = store.trial_records(sweep["id"])
    counts = {s: sum(r.status == s for r in records) for s in TRIAL_STATUSES}
    head = Text(
        f"sweep {sweep['name']} · {store.path} · "
        + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    )
    table = Table(show_lines=False)
    for column in (
        "#",
        "config",
        "rep",
        "status",
        "att",
        "short tok/s",
        "long tok/s",
        "accept",
        "coding",
        "failure",
    ):
        table.add_column(column, overflow="fold")
    for r in records:
        table.add_row(
            str(r.trial_id),
            Text(r.label + (" (baseline)" if r.is_baseline else "")),
            str(r.repeat),
            Text(r.status, style=STATUS_STYLE.get(r.status, "")),
            str(r.attempts),
            _num(r.metrics.get("short_tps")),
            _num(r.metrics.get("long_tps")),
            _num(r.metrics.get("acceptance_length")),
            _coding(r),
            Text(r.failure or ""),
        )
    return Group(head, table, *_failure_lines(store, records))


def _failure_lines(store: Store, records: list[TrialRecord]) -> list[Text]:
    lines = []
    for record in records:
        for attempt in store.attempts(record.trial_id):
            if attempt["state"] in ("failed", "interrupted"):
                lines.append(
                    Text(
                        f"trial {record.trial_id} {record.label} r{record.repeat} attempt {attempt['number']}: "
                        f"{attempt['failure']} — {attempt['detail']} (log: {attempt['log_tail_path'] or 'none'})",
                        style="red" if attempt["state"] == "failed" else "yellow",
                    )
                )
    return lines


def _num(value: Any) -> str:
    return "" if value is None else f"{value:.2f}"


def _coding(record: TrialRecord) -> str:
    passed, total = record.metrics.get("coding_passed"), record.metrics.get("coding_total")
    return "" if total is None else f"{passed:.0f}/{total:.0f}"


def export_rows(store: Store, sweep: sqlite3.Row) -> list[dict[str, Any]]:
    """One flat row per trial: identity, config, status, failure, metrics."""
    rows = []
    for r in store.trial_records(sweep["id"]):
        row = {"sweep": sweep["name"], "trial_id": r.trial_id, "label": r.label}
        row.update(r.config)  # params in wire form (window "none") + user variables
        row.update(
            repeat=r.repeat,
            is_baseline=r.is_baseline,
            status=r.status,
            attempts=r.attempts,
            failure=r.failure,
            failure_detail=r.failure_detail,
            log_tail_path=r.log_tail_path,
        )
        row.update({name: r.metrics.get(name) for name in METRIC_NAMES})
        rows.append(row)
    return rows


def export_csv(store: Store, sweep: sqlite3.Row) -> str:
    rows = export_rows(store, sweep)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def export_json(store: Store, sweep: sqlite3.Row) -> str:
    """Every TrialRecord plus its attempts (timings, failures, identities)."""
    trials = []
    for record in store.trial_records(sweep["id"]):
        attempts = [_attempt_dict(a) for a in store.attempts(record.trial_id)]
        trials.append({**record.to_dict(), "attempt_history": attempts})
    doc = {
        "sweep": {
            "name": sweep["name"],
            "spec_hash": sweep["spec_hash"],
            "spec": sweep["spec_text"],
        },
        "trials": trials,
    }
    return json.dumps(doc, indent=2, default=str) + "\n"


def _attempt_dict(row: sqlite3.Row) -> dict[str, Any]:
    data = dict(row)
    for key in ("timings_json", "identity_json", "hardware_json"):
        data[key.removesuffix("_json")] = json.loads(data.pop(key))
    return data


def write_report(
    store: Store, sweep: sqlite3.Row, out_dir: Path, console: Console
) -> ReportSummary:
    """Hand the store's TrialRecords to `ddtune.report.build_report`; say where it wrote."""
    from ddtune.report import build_report

    records = store.trial_records(sweep["id"])
    out_dir.mkdir(parents=True, exist_ok=True)
    result = build_report(records, out_dir)
    console.print(result.terminal_table(), markup=False, highlight=False)
    files = sorted(p.name for p in out_dir.iterdir())
    console.print(
        f"report for sweep {sweep['name']} ({len(records)} trials) in {out_dir}: {', '.join(files)}"
    )
    return result
