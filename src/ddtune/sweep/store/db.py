"""The results store: one SQLite file per sweep directory (stdlib sqlite3, WAL).

Tables (`schema.py`): sweeps (spec text + hash), trials (one per config ×
repeat, with a status), attempts (one per reconfigure+bench try: timings,
failure class, log tail path, server identity, hardware), samples (raw
per-request rows), results (aggregates + T=0 outputs of the successful attempt),
load_requests (`[bench.load]` per-request rows, `load_rows.py`).

Every state change is one transaction, so a kill at any moment leaves the file
consistent: a trial is `done` exactly when its results row exists. A runner
holds an exclusive lock file (`<store>.lock`) while it works; when a store is
opened and no runner holds the lock, trials and attempts left `running` by a
dead runner become `interrupted`.

A trial's configuration is stored as `Config.to_wire()` JSON (parameters by
`DecodeParams.to_wire()`, window `"none"`) and read back only through
`Config.from_wire()`, which also reads stores written before that (`window: null`).
`trial_records()` (in `records.py`) reads a sweep back for the report.
See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psutil

import ddtune.sweep.store.records as records
import ddtune.sweep.store.slot_tables as slots
from ddtune.bench.result import BenchResult
from ddtune.errors import UserError
from ddtune.records import TrialRecord
from ddtune.sweep.spec.changes import measured_change
from ddtune.sweep.spec.parse import Config
from ddtune.sweep.store.load_rows import insert_load_rows, split_load_rows
from ddtune.sweep.store.modes import SweepMode, write_mode
from ddtune.sweep.store.rows import AttemptRow, RunningAttempt, SweepRow, TrialRow
from ddtune.sweep.store.schema import (
    SCHEMA,
    SCHEMA_VERSION,
    TRIAL_STATUSES,
    ensure_additive_tables,
)


@dataclass(frozen=True)
class PlannedTrial:
    """One trial a plan asks for (a grid up front, a race pass by pass, a search one by one)."""

    order_index: int  # position in the run order, 0-based
    config: Config
    repeat: int  # 1-based pass number
    is_baseline: bool


class SpecChangedError(UserError):
    """The store already holds a sweep of this name run from a different spec."""


class Store:
    """A sweep results store. Open with `Store(path)`; close with `.close()`.

    `Store(path, read_only=True)` never writes (no migration, no recovery, no lock):
    what `ddtune sweep watch` uses while a runner may hold the store."""

    def __init__(self, path: str | Path, create: bool = True, read_only: bool = False) -> None:
        self.path = Path(path)
        self._lock_fd: int | None = None
        if (read_only or not create) and not self.path.is_file():
            raise UserError(
                f"no sweep store at {self.path}; run `ddtune sweep run SPEC` first or pass --store"
            )
        if read_only:
            self.db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
            self.db.row_factory = sqlite3.Row
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.execute("PRAGMA synchronous=FULL")
        self._migrate()
        with self.tx() as db:
            ensure_additive_tables(db)  # load rows and the ray backend's slot tables
        self.recover_if_unlocked()

    def close(self) -> None:
        self.release()
        self.db.close()

    # --- transactions, schema, locking -------------------------------------------

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: all of it lands or none of it does."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def _migrate(self) -> None:
        with self.tx() as db:
            exists = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_version'"
            ).fetchone()
            if not exists:
                for statement in SCHEMA.split(";"):  # executescript() would commit early
                    if statement.strip():
                        db.execute(statement)
                db.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
                return
            version = db.execute("SELECT version FROM schema_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise UserError(
                f"{self.path} was written by a newer ddtune (schema {version} > {SCHEMA_VERSION}); upgrade ddtune"
            )
        # Later schema versions add their migrations here, one step per version.

    def acquire(self) -> None:
        """Become the one runner of this store (kernel-released if we die)."""
        lock_path = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise UserError(
                f"another ddtune sweep runner (pid {holder}) is using {self.path}; wait for it or stop it"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd

    def runner_pid(self) -> int | None:
        """The pid of the runner holding this store's lock now, else None."""
        return runner_pid(self.path)

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def recover_if_unlocked(self) -> int:
        """Mark work left `running` by a dead runner `interrupted`; returns trials fixed."""
        held_before = self._lock_fd is not None
        if not held_before:
            try:
                self.acquire()
            except UserError:
                return 0  # a live runner owns the running trials
        try:
            return self._recover()
        finally:
            if not held_before:
                self.release()

    def _recover(self) -> int:
        now = time.time()
        with self.tx() as db:
            db.execute(
                "UPDATE attempts SET state='interrupted', ended_at=?, failure='interrupted',"
                " detail=COALESCE(detail, 'the runner stopped during this attempt')"
                " WHERE state='running'",
                (now,),
            )
            cursor = db.execute(
                "UPDATE trials SET status='interrupted', updated_at=? WHERE status='running'",
                (now,),
            )
            slots.stop_all(db)
            return cursor.rowcount

    # --- sweeps and trials ---------------------------------------------------------

    def open_sweep(
        self,
        name: str,
        spec_text: str,
        spec_hash: str,
        plan: list[PlannedTrial],
        spec_dir: str | None = None,
        mode: SweepMode | None = None,
    ) -> int:
        """The sweep's id; creates it with all its trials (pending) and its race mode
        (`modes.py`) the first time."""
        with self.tx() as db:
            row = db.execute("SELECT id, spec_hash FROM sweeps WHERE name=?", (name,)).fetchone()
            if row:
                if row["spec_hash"] != spec_hash:
                    _resumed_with(db, int(row["id"]), self.path, name, spec_text, spec_hash, plan)
                return int(row["id"])
            sweep_id = _row_id(
                db.execute(
                    "INSERT INTO sweeps (name, spec_text, spec_hash, spec_dir, created_at)"
                    " VALUES (?,?,?,?,?)",
                    (name, spec_text, spec_hash, spec_dir, time.time()),
                )
            )
            _insert_trials(db, int(sweep_id), plan)
            if mode is not None:
                write_mode(db, int(sweep_id), mode)
            return int(sweep_id)

    def add_trials(self, sweep_id: int, plan: list[PlannedTrial]) -> list[TrialRow]:
        """Append planned trials (a race's next pass, a search's next trial); returns their rows."""
        with self.tx() as db:
            _insert_trials(db, sweep_id, plan)
        indexes = {t.order_index for t in plan}
        return [r for r in self.trials(sweep_id) if r.order_index in indexes]

    def next_order_index(self, sweep_id: int) -> int:
        row = self.db.execute(
            "SELECT COALESCE(MAX(order_index), -1) + 1 FROM trials WHERE sweep_id=?", (sweep_id,)
        ).fetchone()
        return int(row[0])

    def trial_seconds(self, sweep_id: int) -> dict[int, float]:
        """trial id -> seconds its finished attempts took (stored, so a replay sees the same).

        An attempt of a request-interleaved pass overlaps the others of its pass in
        time, so its own share is stored as timings `spent_s` and counted instead."""
        rows = self.db.execute(
            "SELECT a.trial_id, SUM(COALESCE(json_extract(a.timings_json, '$.spent_s'),"
            " a.ended_at - a.started_at)) FROM attempts a"
            " JOIN trials t ON t.id = a.trial_id WHERE t.sweep_id=? AND a.ended_at IS NOT NULL"
            " GROUP BY a.trial_id",
            (sweep_id,),
        )
        return {int(r[0]): float(r[1]) for r in rows}

    def sweep_row(self, name: str | None = None) -> SweepRow:
        """The named sweep, or the most recent one."""
        if name:
            row = self.db.execute("SELECT * FROM sweeps WHERE name=?", (name,)).fetchone()
        else:
            row = self.db.execute("SELECT * FROM sweeps ORDER BY id DESC LIMIT 1").fetchone()
        if row is None:
            raise UserError(f"{self.path} holds no sweep{' named ' + repr(name) if name else ''}")
        return SweepRow.from_sql(row)

    def sweep_id(self, name: str) -> int | None:
        """The id of the sweep named `name`, None when the store holds none by that name."""
        row = self.db.execute("SELECT id FROM sweeps WHERE name=?", (name,)).fetchone()
        return None if row is None else int(row["id"])

    def sweep_names(self) -> list[str]:
        """Every sweep's name, oldest first."""
        return [str(row["name"]) for row in self.db.execute("SELECT name FROM sweeps ORDER BY id")]

    def sweep_ids(self) -> list[int]:
        """Every sweep's id, oldest first."""
        return [int(row["id"]) for row in self.db.execute("SELECT id FROM sweeps ORDER BY id")]

    def done_timings(self) -> list[dict[str, Any]]:
        """The stored timings of every done attempt, of every sweep in the store."""
        rows = self.db.execute("SELECT timings_json FROM attempts WHERE state='done'")
        return [json.loads(text) for (text,) in rows]

    def running_attempts(self, sweep_id: int) -> list[RunningAttempt]:
        """The attempts running now, oldest first."""
        rows = self.db.execute(
            "SELECT t.id, t.label, t.repeat, a.number, a.started_at FROM attempts a"
            " JOIN trials t ON t.id = a.trial_id WHERE t.sweep_id=? AND a.state='running'"
            " ORDER BY a.started_at",
            (sweep_id,),
        ).fetchall()
        return [RunningAttempt(*row) for row in rows]

    def trials(self, sweep_id: int, statuses: tuple[str, ...] = TRIAL_STATUSES) -> list[TrialRow]:
        marks = ",".join("?" * len(statuses))
        rows = self.db.execute(
            f"SELECT * FROM trials WHERE sweep_id=? AND status IN ({marks}) ORDER BY order_index",
            (sweep_id, *statuses),
        ).fetchall()
        return [TrialRow.from_sql(row) for row in rows]

    def trial_config(self, trial: TrialRow) -> Config:
        """The configuration of a trial row (`config_json` read back by `Config.from_wire`)."""
        return Config.from_wire(json.loads(trial.config_json), f"trial {trial.id}")

    def pass_counts(self, sweep_id: int, repeat: int) -> tuple[int, int]:
        """(unfinished, finished) trials of pass `repeat`: not yet done or failed, and done
        or failed. A race that plans a trial at a time may add to a pass that had ended."""
        row = self.db.execute(
            "SELECT COALESCE(SUM(status IN ('pending', 'running', 'interrupted')), 0),"
            " COALESCE(SUM(status IN ('done', 'failed')), 0)"
            " FROM trials WHERE sweep_id=? AND repeat=?",
            (sweep_id, repeat),
        ).fetchone()
        return int(row[0]), int(row[1])

    def attempts(self, trial_id: int) -> list[AttemptRow]:
        rows = self.db.execute(
            "SELECT * FROM attempts WHERE trial_id=? ORDER BY number", (trial_id,)
        ).fetchall()
        return [AttemptRow.from_sql(row) for row in rows]

    def reset_trials(self, sweep_id: int, statuses: tuple[str, ...]) -> list[int]:
        """Put trials back to `pending` (for `sweep retry`); their attempts stay. Returns ids."""
        marks = ",".join("?" * len(statuses))
        with self.tx() as db:
            ids = [
                r[0]
                for r in db.execute(
                    f"SELECT id FROM trials WHERE sweep_id=? AND status IN ({marks})",
                    (sweep_id, *statuses),
                )
            ]
            db.executemany(
                "UPDATE trials SET status='pending', updated_at=? WHERE id=?",
                [(time.time(), i) for i in ids],
            )
            return ids

    # --- attempts ------------------------------------------------------------------

    def begin_attempt(self, trial_id: int) -> tuple[int, int]:
        """Trial → running, a new attempt row; returns (attempt id, attempt number)."""
        with self.tx() as db:
            number = db.execute(
                "SELECT COALESCE(MAX(number), 0) + 1 FROM attempts WHERE trial_id=?", (trial_id,)
            ).fetchone()[0]
            attempt_id = _row_id(
                db.execute(
                    "INSERT INTO attempts (trial_id, number, runner_pid, state, started_at)"
                    " VALUES (?,?,?,'running',?)",
                    (trial_id, number, os.getpid(), time.time()),
                )
            )
            _set_status(db, trial_id, "running")
            return int(attempt_id), int(number)

    def note_attempt(self, attempt_id: int, **fields: Any) -> None:
        """Save timings / identity / hardware / log path of a running attempt."""
        with self.tx() as db:
            _update_attempt(db, attempt_id, fields)

    def fail_attempt(self, attempt_id: int, failure: str, detail: str, **fields: Any) -> None:
        with self.tx() as db:
            _update_attempt(db, attempt_id, {**fields, "failure": failure, "detail": detail})
            db.execute(
                "UPDATE attempts SET state='failed', ended_at=? WHERE id=?",
                (time.time(), attempt_id),
            )

    def reopen_trials(self, trial_ids: list[int]) -> None:
        """Put these trials back to `pending` (the breaker: the service, not they, failed)."""
        with self.tx() as db:
            db.executemany(
                "UPDATE trials SET status='pending', updated_at=? WHERE id=?",
                [(time.time(), trial_id) for trial_id in trial_ids],
            )

    def finish_trial(self, trial_id: int, status: str) -> None:
        """Close a trial as `failed` (all attempts used) or `interrupted`."""
        with self.tx() as db:
            if status == "interrupted":
                db.execute(
                    "UPDATE attempts SET state='interrupted', ended_at=?, failure='interrupted',"
                    " detail=COALESCE(detail, 'interrupted by the user (signal)')"
                    " WHERE trial_id=? AND state='running'",
                    (time.time(), trial_id),
                )
                db.execute(  # a trial that finished just before the signal stays done
                    "UPDATE trials SET status='interrupted', updated_at=? WHERE id=? AND status='running'",
                    (time.time(), trial_id),
                )
                return
            _set_status(db, trial_id, status)

    def record_result(
        self, trial_id: int, attempt_id: int, result: BenchResult, **fields: Any
    ) -> None:
        """Samples + results + attempt done + trial done, in one transaction."""
        bench, load_rows = split_load_rows(result.to_dict())
        samples = bench.get("samples") or []
        kept = {k: v for k, v in bench.items() if k != "samples"}
        with self.tx() as db:
            db.executemany(
                "INSERT INTO samples (attempt_id, idx, row_json) VALUES (?,?,?)",
                [(attempt_id, i, json.dumps(row, default=str)) for i, row in enumerate(samples)],
            )
            insert_load_rows(db, attempt_id, load_rows)
            db.execute(
                "INSERT OR REPLACE INTO results (trial_id, attempt_id, aggregates_json, outputs_json,"
                " bench_json) VALUES (?,?,?,?,?)",
                (
                    trial_id,
                    attempt_id,
                    json.dumps(bench.get("aggregates") or {}),
                    json.dumps(bench.get("outputs") or []),
                    json.dumps(kept, default=str),
                ),
            )
            _update_attempt(db, attempt_id, fields)
            db.execute(
                "UPDATE attempts SET state='done', ended_at=? WHERE id=?", (time.time(), attempt_id)
            )
            _set_status(db, trial_id, "done")

    # --- reading for the report ------------------------------------------------------

    def trial_records(self, sweep_id: int) -> list[TrialRecord]:
        """One `TrialRecord` per trial, in run order (what `build_report` reads)."""
        return records.trial_records(self, sweep_id)


def runner_pid(store_path: Path) -> int | None:
    """The pid of the runner holding the store's lock now, else None. Read only: the pid
    the runner wrote into `<store>.lock`, alive and holding that file open."""
    lock_path = store_path.with_name(store_path.name + ".lock")
    try:
        pid = int(lock_path.read_text().strip() or 0)
        files = psutil.Process(pid).open_files() if pid else []
    except (OSError, ValueError, psutil.Error):
        return None
    held = any(Path(f.path) == lock_path.resolve() for f in files)
    return pid if held else None


def _insert_trials(db: sqlite3.Connection, sweep_id: int, plan: list[PlannedTrial]) -> None:
    for trial in plan:
        db.execute(
            "INSERT INTO trials (sweep_id, order_index, config_json, config_hash, label,"
            " repeat, is_baseline, status, updated_at) VALUES (?,?,?,?,?,?,?,'pending',?)",
            (
                sweep_id,
                trial.order_index,
                json.dumps(trial.config.to_wire()),
                trial.config.hash(),
                trial.config.label(),
                trial.repeat,
                int(trial.is_baseline),
                time.time(),
            ),
        )


def _resumed_with(
    db: sqlite3.Connection,
    sweep_id: int,
    path: Path,
    name: str,
    spec_text: str,
    spec_hash: str,
    plan: list[PlannedTrial],
) -> None:
    """A resume with a changed spec: refused when what is measured changed (the key named,
    `spec/changes.py`); else the new spec is kept and the trials its plan adds (more
    repeats) are appended. Every finished trial stays."""
    stored = db.execute("SELECT spec_text FROM sweeps WHERE id=?", (sweep_id,)).fetchone()
    change = measured_change(stored["spec_text"], spec_text)
    if change is not None:
        raise SpecChangedError(change.message(str(path), name), key=change.key)
    db.execute(
        "UPDATE sweeps SET spec_text=?, spec_hash=? WHERE id=?", (spec_text, spec_hash, sweep_id)
    )
    have = {
        (r["config_hash"], r["repeat"])
        for r in db.execute("SELECT config_hash, repeat FROM trials WHERE sweep_id=?", (sweep_id,))
    }
    start = db.execute(
        "SELECT COALESCE(MAX(order_index), -1) + 1 FROM trials WHERE sweep_id=?", (sweep_id,)
    ).fetchone()[0]
    missing = [t for t in plan if (t.config.hash(), t.repeat) not in have]
    _insert_trials(db, sweep_id, [replace(t, order_index=start + i) for i, t in enumerate(missing)])


def _row_id(cursor: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just wrote."""
    if cursor.lastrowid is None:
        raise sqlite3.DatabaseError("INSERT returned no row id")
    return cursor.lastrowid


def _set_status(db: sqlite3.Connection, trial_id: int, status: str) -> None:
    db.execute(
        "UPDATE trials SET status=?, updated_at=? WHERE id=?", (status, time.time(), trial_id)
    )


_ATTEMPT_JSON = {
    "timings": "timings_json",
    "identity": "identity_json",
    "hardware": "hardware_json",
}
_ATTEMPT_TEXT = ("failure", "detail", "log_tail_path")


def _update_attempt(db: sqlite3.Connection, attempt_id: int, fields: dict[str, Any]) -> None:
    for key, value in fields.items():
        if key in _ATTEMPT_JSON:
            column, value = _ATTEMPT_JSON[key], json.dumps(value or {}, default=str)
        elif key in _ATTEMPT_TEXT:
            column = key
        else:
            raise ValueError(f"unknown attempt field {key!r}")
        db.execute(f"UPDATE attempts SET {column}=? WHERE id=?", (value, attempt_id))


__all__ = ["PlannedTrial", "SpecChangedError", "Store"]
