"""How a race runs, fixed when its sweep is created, and when each trial ran.

    sweep_modes   sweep_id → restart_bound (0/1), the reason, the costs it was chosen
                  from (start_s, bench_s) and the most benches one start may get
    sweep_forecasts  sweep_id → a predicting race's forecast (`ddtune.trace.forecast`)
    sweep_spreads    sweep_id → a restart-bound race's start spread measured from the
                  store's earlier sweeps (`sweep/plan/spread.py`), with its source
    sweep_reused     sweep_id → a predicting race's baseline start taken from an earlier
                  sweep (`sweep/plan/reuse.py`), JSON

The strategy chooses the mode (`Strategy.choose_mode`, asked by
`sweep/plan/prepare.py`); `Store.open_sweep` writes it in the
transaction that creates the sweep, so a resumed race runs (and a report
replays) the mode it started with even when the costs measured since would
choose otherwise. A sweep without a row (a grid, or a store written before the
table) runs as it always did: not restart-bound. `trial_times` gives the
restart-bound race its clock: when each finished trial ended, and whether its
attempt restarted the server. See docs/sweeps.md "Restart-bound races".
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from ddtune.sweep.store.connected import Connected


@dataclass(frozen=True)
class StartSpread:
    """What one server start moves a config's level by (log-sd), and where that was seen."""

    sd: float
    source: str  # in words, for `sweep plan` and the run


@dataclass(frozen=True)
class SweepMode:
    restart_bound: bool
    reason: str  # why, in words, for `sweep plan`, the run and the report
    start_s: float | None = None  # the costs the choice was made from (None: unknown)
    bench_s: float | None = None
    most_benches: int = 1  # restart-bound: the most benches on one start
    forecast: str | None = None  # strategy predict: the trace's `Forecast`, JSON, fixed at creation
    spread: StartSpread | None = None  # restart-bound: measured on earlier sweeps, at creation
    reused: str | None = (
        None  # predict: the baseline's start in an earlier sweep, JSON, at creation
    )


NOT_RESTART_BOUND = SweepMode(False, "passes of restarts (the sweep predates restart-bound races)")


def write_mode(db: sqlite3.Connection, sweep_id: int, mode: SweepMode) -> None:
    """Inside the transaction that creates the sweep."""
    db.execute(
        "INSERT INTO sweep_modes (sweep_id, restart_bound, reason, start_s, bench_s, most_benches)"
        " VALUES (?,?,?,?,?,?)",
        (
            sweep_id,
            int(mode.restart_bound),
            mode.reason,
            mode.start_s,
            mode.bench_s,
            mode.most_benches,
        ),
    )
    if mode.forecast is not None:
        db.execute(
            "INSERT INTO sweep_forecasts (sweep_id, forecast_json) VALUES (?,?)",
            (sweep_id, mode.forecast),
        )
    if mode.spread is not None:
        db.execute(
            "INSERT INTO sweep_spreads (sweep_id, sd, source) VALUES (?,?,?)",
            (sweep_id, mode.spread.sd, mode.spread.source),
        )
    if mode.reused is not None:
        db.execute(
            "INSERT INTO sweep_reused (sweep_id, reused_json) VALUES (?,?)",
            (sweep_id, mode.reused),
        )


def read_mode(store: Connected, sweep_id: int) -> SweepMode:
    """The stored mode; NOT_RESTART_BOUND without a row, or without the table (a store from
    before it, opened read-only, so not migrated: `sweep watch`, `sweep report`)."""
    row = _row(store, "sweep_modes", sweep_id)
    if row is None:
        return NOT_RESTART_BOUND
    forecast = _row(store, "sweep_forecasts", sweep_id)
    spread = _row(store, "sweep_spreads", sweep_id)
    reused = _row(store, "sweep_reused", sweep_id)
    return SweepMode(
        bool(row["restart_bound"]),
        row["reason"],
        row["start_s"],
        row["bench_s"],
        int(row["most_benches"]),
        None if forecast is None else str(forecast["forecast_json"]),
        None if spread is None else StartSpread(float(spread["sd"]), str(spread["source"])),
        None if reused is None else str(reused["reused_json"]),
    )


def _row(store: Connected, table: str, sweep_id: int) -> sqlite3.Row | None:
    """The sweep's row of an additive table; None without one, or without the table (a store
    from before it, opened read-only)."""
    try:
        return store.db.execute(f"SELECT * FROM {table} WHERE sweep_id=?", (sweep_id,)).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
        return None


def trial_times(
    store: Connected, sweep_id: int, since: float | None = None
) -> dict[int, tuple[float, bool]]:
    """trial id → (hours from `since` (default: the sweep's creation) to the trial's end,
    restarted?).

    The end is the trial's result attempt (done) or its last attempt (failed);
    "restarted" is whether that attempt started the server (its timings hold
    `start_to_ready_s`) rather than benching a start already serving. One clock for
    every sweep of a store: a start reused from an earlier sweep is read at `since` =
    the new sweep's creation (a negative time)."""
    if since is None:
        since = store.db.execute(
            "SELECT created_at FROM sweeps WHERE id=?", (sweep_id,)
        ).fetchone()[0]
    rows = store.db.execute(
        "SELECT t.id, a.ended_at, a.timings_json FROM trials t JOIN attempts a ON a.trial_id = t.id"
        " LEFT JOIN results r ON r.trial_id = t.id WHERE t.sweep_id=? AND a.ended_at IS NOT NULL"
        " AND (r.attempt_id = a.id OR (r.attempt_id IS NULL AND a.number ="
        " (SELECT MAX(number) FROM attempts WHERE trial_id = t.id)))",
        (sweep_id,),
    )
    return {
        int(trial_id): ((ended - since) / 3600, "start_to_ready_s" in json.loads(timings))
        for trial_id, ended, timings in rows
    }


__all__ = [
    "NOT_RESTART_BOUND",
    "StartSpread",
    "SweepMode",
    "read_mode",
    "trial_times",
    "write_mode",
]
