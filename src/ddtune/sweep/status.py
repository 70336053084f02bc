"""`ddtune sweep status`: counts per status, the slots, one row per trial, and every failure.

Everything here reads `TrialRecord`s (`Store.trial_records`); a failed
attempt shows its class, detail and the log it left (`store/files.py`).
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ddtune.records import TrialRecord
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.files import failed_attempts
from ddtune.sweep.store.rows import SweepRow
from ddtune.sweep.store.schema import TRIAL_STATUSES
from ddtune.sweep.store.slot_tables import slot_table

STATUS_STYLE = {
    "done": "green",
    "failed": "red",
    "interrupted": "yellow",
    "running": "cyan",
    "pending": "dim",
}


def status_table(store: Store, sweep: SweepRow) -> Group:
    """Counts per status, the slots (ray backend), one row per trial, and every failure."""
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
    slots = slot_table(store, sweep["id"])  # per-slot state (ray backend)
    return Group(head, *slots, table, *_failure_lines(store, records))


def _failure_lines(store: Store, records: list[TrialRecord]) -> list[Text]:
    return [
        Text(
            f"trial {record.trial_id} {record.label} r{record.repeat} attempt {attempt['number']}: "
            f"{attempt['failure']} — {attempt['detail']} (log: {log or 'none'})",
            style="red" if attempt["state"] == "failed" else "yellow",
        )
        for record, attempt, log in failed_attempts(store, records)
    ]


def _num(value: Any) -> str:
    return "" if value is None else f"{value:.2f}"


def _coding(record: TrialRecord) -> str:
    return "" if record.coding is None else "{}/{}".format(*record.coding)
