"""Service slots in the store: which slot ran each attempt, and what each slot is doing now.

    attempt_slots  attempt_id → slot name, node address (ray backend only; none = local)
    slots          per sweep and slot: state (starting | idle | busy | backoff |
                   retired | stopped), node, actor pid, current trial, phase,
                   trials done, detail, updated_at

The tables (`schema.py`) are created on open when missing, so stores
written before them read as before. Only the driver writes them (its
`SlotLoop`); `sweep status` reads them (`slot_table`), and the report reads
each done trial's slot through `records.py` (`conditions["slot"]`).
See docs/sweeps.md "Scale out".
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from rich.table import Table
from rich.text import Text

from ddtune.sweep.store.connected import Connected

STATE_STYLE = {"idle": "dim", "busy": "cyan", "backoff": "yellow", "retired": "red"}


def stop_all(db: sqlite3.Connection) -> None:
    """No runner holds the store: no slot is doing anything (inside a transaction)."""
    db.execute(
        "UPDATE slots SET state='stopped', trial_id=NULL, phase=NULL, updated_at=?"
        " WHERE state != 'stopped'",
        (time.time(),),
    )


def record_attempt_slot(store: Connected, attempt_id: int, slot: str, node: str | None) -> None:
    with store.tx() as db:
        db.execute(
            "INSERT OR REPLACE INTO attempt_slots (attempt_id, slot, node) VALUES (?,?,?)",
            (attempt_id, slot, node),
        )


def attempt_slot(store: Connected, attempt_id: int) -> tuple[str, str | None] | None:
    """(slot, node) of an attempt, or None when the local backend ran it (or the store is
    from before the slot tables, opened read-only, so not migrated)."""
    try:
        row = store.db.execute(
            "SELECT slot, node FROM attempt_slots WHERE attempt_id=?", (attempt_id,)
        ).fetchone()
    except sqlite3.OperationalError:
        return None
    return None if row is None else (row["slot"], row["node"])


def set_slot(store: Connected, sweep_id: int, name: str, **fields: Any) -> None:
    """Upsert one slot's row; `fields` among state, node, pid, trial_id, phase, done, detail."""
    with store.tx() as db:
        db.execute(
            "INSERT OR IGNORE INTO slots (sweep_id, name, state, updated_at) VALUES (?,?,?,?)",
            (sweep_id, name, "starting", time.time()),
        )
        for key, value in fields.items():
            if key not in ("state", "node", "pid", "trial_id", "phase", "done", "detail"):
                raise ValueError(f"unknown slot field {key!r}")
            db.execute(
                f"UPDATE slots SET {key}=?, updated_at=? WHERE sweep_id=? AND name=?",
                (value, time.time(), sweep_id, name),
            )


def slot_rows(store: Connected, sweep_id: int) -> list[dict[str, Any]]:
    """The ray backend's slots with their current trial's label and repeat; [] for a store
    from before the slot table (opened read-only, so not migrated)."""
    try:
        rows = store.db.execute(
            "SELECT s.*, t.label, t.repeat FROM slots s LEFT JOIN trials t ON t.id = s.trial_id"
            " WHERE s.sweep_id=? ORDER BY s.name",
            (sweep_id,),
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    return [dict(row) for row in rows]


def slot_table(store: Connected, sweep_id: int) -> list[Table]:
    """`sweep status`: one row per slot (state, node, current trial and phase); [] if none."""
    rows = slot_rows(store, sweep_id)
    if not rows:
        return []
    table = Table(title="slots", title_justify="left", show_lines=False)
    for column in ("slot", "state", "node", "pid", "trial", "phase", "done", "detail", "updated"):
        table.add_column(column, overflow="fold")
    now = time.time()
    for r in rows:
        trial = f"{r['trial_id']} {r['label']} r{r['repeat']}" if r["trial_id"] else ""
        table.add_row(
            r["name"],
            Text(r["state"], style=STATE_STYLE.get(r["state"], "")),
            r["node"] or "",
            str(r["pid"] or ""),
            Text(trial),
            Text(r["phase"] or ""),
            str(r["done"]),
            Text(r["detail"] or ""),
            f"{now - r['updated_at']:.0f}s ago",
        )
    return [table]


__all__ = [
    "attempt_slot",
    "record_attempt_slot",
    "set_slot",
    "slot_rows",
    "slot_table",
    "stop_all",
]
