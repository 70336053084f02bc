"""Every table of the results store, defined in one place.

    sweeps         one per sweep: spec text + hash, created_at
    trials         one per config x pass, with a status (TRIAL_STATUSES)
    attempts       one per reconfigure + bench try: timings, failure class, detail,
                   log tail path, server identity, hardware
    samples        raw per-request rows of a successful attempt
    results        aggregates + T=0 outputs of the successful attempt
    load_requests  `[bench.load]` per-request rows (`load_rows.py`)
    attempt_slots  attempt -> slot name, node (ray backend only; `slot_tables.py`)
    slots          per sweep and slot: what it is doing now (ray backend only)
    sweep_modes    per sweep: a race restart-bound or not, why, and its costs (`modes.py`)
    sweep_forecasts  per predicting sweep: what its trace or first answers predicted
    sweep_spreads  per restart-bound sweep: the start spread measured on earlier sweeps
    sweep_reused   per predicting sweep: the baseline's start it took from an earlier sweep

The first five are the store's schema version 1; the others are created
on open when missing (`ensure_additive_tables`), so stores written before
them read as before.
"""

from __future__ import annotations

import sqlite3

SCHEMA_VERSION = 1
TRIAL_STATUSES = ("pending", "running", "done", "failed", "interrupted")
SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE sweeps (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
    spec_text TEXT NOT NULL, spec_hash TEXT NOT NULL, spec_dir TEXT, created_at REAL NOT NULL);
CREATE TABLE trials (
    id INTEGER PRIMARY KEY, sweep_id INTEGER NOT NULL REFERENCES sweeps(id),
    order_index INTEGER NOT NULL, config_json TEXT NOT NULL, config_hash TEXT NOT NULL,
    label TEXT NOT NULL, repeat INTEGER NOT NULL, is_baseline INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN
        ('pending', 'running', 'done', 'failed', 'interrupted')),
    updated_at REAL NOT NULL,
    UNIQUE (sweep_id, config_hash, repeat), UNIQUE (sweep_id, order_index));
CREATE TABLE attempts (
    id INTEGER PRIMARY KEY, trial_id INTEGER NOT NULL REFERENCES trials(id),
    number INTEGER NOT NULL, runner_pid INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('running', 'done', 'failed', 'interrupted')),
    started_at REAL NOT NULL, ended_at REAL,
    timings_json TEXT NOT NULL DEFAULT '{}', failure TEXT, detail TEXT, log_tail_path TEXT,
    identity_json TEXT NOT NULL DEFAULT '{}', hardware_json TEXT NOT NULL DEFAULT '{}',
    UNIQUE (trial_id, number));
CREATE TABLE samples (
    id INTEGER PRIMARY KEY, attempt_id INTEGER NOT NULL REFERENCES attempts(id),
    idx INTEGER NOT NULL, row_json TEXT NOT NULL);
CREATE TABLE results (
    trial_id INTEGER PRIMARY KEY REFERENCES trials(id),
    attempt_id INTEGER NOT NULL REFERENCES attempts(id),
    aggregates_json TEXT NOT NULL, outputs_json TEXT NOT NULL, bench_json TEXT NOT NULL);
CREATE INDEX trials_by_sweep ON trials (sweep_id, order_index);
CREATE INDEX samples_by_attempt ON samples (attempt_id, idx);
"""

LOAD_TABLE = (
    "CREATE TABLE IF NOT EXISTS load_requests ("
    " id INTEGER PRIMARY KEY, attempt_id INTEGER NOT NULL REFERENCES attempts(id),"
    " level TEXT NOT NULL, idx INTEGER NOT NULL, row_json TEXT NOT NULL)"
)
LOAD_INDEX = (
    "CREATE INDEX IF NOT EXISTS load_requests_by_attempt ON load_requests (attempt_id, idx)"
)
SLOT_STATES = ("starting", "idle", "busy", "backoff", "retired", "stopped")
SLOT_TABLES = (
    """CREATE TABLE IF NOT EXISTS attempt_slots (
        attempt_id INTEGER PRIMARY KEY REFERENCES attempts(id),
        slot TEXT NOT NULL, node TEXT)""",
    """CREATE TABLE IF NOT EXISTS slots (
        sweep_id INTEGER NOT NULL REFERENCES sweeps(id), name TEXT NOT NULL,
        state TEXT NOT NULL, node TEXT, pid INTEGER, trial_id INTEGER, phase TEXT,
        done INTEGER NOT NULL DEFAULT 0, detail TEXT, updated_at REAL NOT NULL,
        PRIMARY KEY (sweep_id, name))""",
)


MODE_TABLE = (
    "CREATE TABLE IF NOT EXISTS sweep_modes ("
    " sweep_id INTEGER PRIMARY KEY REFERENCES sweeps(id), restart_bound INTEGER NOT NULL,"
    " reason TEXT NOT NULL, start_s REAL, bench_s REAL, most_benches INTEGER NOT NULL)"
)
FORECAST_TABLE = (
    "CREATE TABLE IF NOT EXISTS sweep_forecasts ("
    " sweep_id INTEGER PRIMARY KEY REFERENCES sweeps(id), forecast_json TEXT NOT NULL)"
)
SPREAD_TABLE = (
    "CREATE TABLE IF NOT EXISTS sweep_spreads ("
    " sweep_id INTEGER PRIMARY KEY REFERENCES sweeps(id), sd REAL NOT NULL, source TEXT NOT NULL)"
)
REUSED_TABLE = (
    "CREATE TABLE IF NOT EXISTS sweep_reused ("
    " sweep_id INTEGER PRIMARY KEY REFERENCES sweeps(id), reused_json TEXT NOT NULL)"
)


def ensure_additive_tables(db: sqlite3.Connection) -> None:
    """Create the tables added after version 1 if missing (inside the caller's transaction)."""
    for statement in (
        *SLOT_TABLES,
        LOAD_TABLE,
        LOAD_INDEX,
        MODE_TABLE,
        FORECAST_TABLE,
        SPREAD_TABLE,
        REUSED_TABLE,
    ):
        db.execute(statement)
