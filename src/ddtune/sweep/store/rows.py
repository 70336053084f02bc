"""The rows the store hands out: frozen, typed, one class per table (never an `sqlite3.Row`).

    sweep = store.sweep_row("demo")        # SweepRow
    for trial in store.trials(sweep.id):   # TrialRow
        attempts = store.attempts(trial.id)  # AttemptRow

Each field is the column of the same name in `schema.py`. `row["label"]`
reads a field too (the way callers read rows before they were typed);
`as_dict()` gives the columns as a dict (`sweep export`). Only the store
builds rows (`from_sql`): outside `sweep/store/` nothing imports sqlite3.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass, fields
from typing import Any, Self


class Row:
    """What every row can do: read a column by name, give them all as a dict."""

    def __getitem__(self, column: str) -> Any:
        return getattr(self, column)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_sql(cls, row: sqlite3.Row) -> Self:
        return cls(**{f.name: row[f.name] for f in fields(cls)})  # type: ignore[arg-type]


@dataclass(frozen=True)
class SweepRow(Row):
    id: int
    name: str
    spec_text: str
    spec_hash: str
    spec_dir: str | None
    created_at: float


@dataclass(frozen=True)
class TrialRow(Row):
    id: int
    sweep_id: int
    order_index: int
    config_json: str
    config_hash: str
    label: str
    repeat: int
    is_baseline: int
    status: str
    updated_at: float


@dataclass(frozen=True)
class AttemptRow(Row):
    id: int
    trial_id: int
    number: int
    runner_pid: int
    state: str
    started_at: float
    ended_at: float | None
    timings_json: str
    failure: str | None
    detail: str | None
    log_tail_path: str | None
    identity_json: str
    hardware_json: str


@dataclass(frozen=True)
class RunningAttempt:
    """An attempt running now, with its trial's label (`sweep watch`)."""

    trial_id: int
    label: str
    repeat: int
    number: int
    started_at: float


__all__ = ["AttemptRow", "Row", "RunningAttempt", "SweepRow", "TrialRow"]
