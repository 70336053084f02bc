"""The per-request rows of `[bench.load]` levels in the store: one additive table.

    load_requests (attempt_id, level, idx, row_json)   -- one row per measured request

`record_result` moves `bench["load_result"]["requests"]` into this table (the
per-level figures and the max-rate search stay in the results row's
`bench_json`); `read_load` puts them back together for a `TrialRecord`. The
table is created on open when missing, so stores written before it read as
having no load rows. See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any


def split_load_rows(bench: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the bench dict without the load rows, the rows)."""
    load = bench.get("load_result")
    if not isinstance(load, dict) or not load.get("requests"):
        return bench, []
    kept = {k: v for k, v in load.items() if k != "requests"}
    return {**bench, "load_result": kept}, list(load["requests"])


def insert_load_rows(db: sqlite3.Connection, attempt_id: int, rows: list[dict[str, Any]]) -> None:
    db.executemany(
        "INSERT INTO load_requests (attempt_id, level, idx, row_json) VALUES (?,?,?,?)",
        [
            (attempt_id, str(row.get("level")), i, json.dumps(row, default=str))
            for i, row in enumerate(rows)
        ],
    )


def read_load(
    db: sqlite3.Connection, attempt_id: int, load: dict[str, Any] | None
) -> dict[str, Any]:
    """`{"levels", "max_rate", "requests"}` of an attempt (`load`: its stored `load_result`,
    the rows moved out); {} when it ran no load levels."""
    if not isinstance(load, dict):
        return {}
    rows = [
        json.loads(r[0])
        for r in db.execute(
            "SELECT row_json FROM load_requests WHERE attempt_id=? ORDER BY idx", (attempt_id,)
        )
    ]
    return {**load, "requests": rows}


__all__ = ["insert_load_rows", "read_load", "split_load_rows"]
