"""Stores written before: every earlier layout still opens, read-only and read-write.

Schema version 1 is the only numbered version; the tables added since are
additive (`schema.ensure_additive_tables`): the ray backend's slot tables,
`[bench.load]` rows, restart-bound modes, predicted forecasts. A store from
before each one is this store with those tables dropped, oldest first.
"""

from __future__ import annotations

import sqlite3

import pytest

from ddtune.bench.result import BenchResult
from ddtune.params import DecodeParams
from ddtune.sweep.plan.trial_order import plan_trials
from ddtune.sweep.spec.parse import Config
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.modes import NOT_RESTART_BOUND, read_mode
from ddtune.sweep.store.rows import AttemptRow, SweepRow, TrialRow
from ddtune.sweep.store.slot_tables import slot_rows

PLAN = plan_trials(
    [(Config(DecodeParams("ar").canonical()), True), (Config(DecodeParams("ddtree", 8, 2)), False)],
    repeats=1,
    order="interleaved",
)
BENCH = {"aggregates": {"short_tps": 10.5}, "samples": [], "outputs": ["a"], "hardware": {}}

# Each earlier layout: the tables it did not have yet (newest additions last).
ADDED = ["sweep_forecasts", "sweep_modes", "load_requests", "attempt_slots", "slots"]
LAYOUTS = {f"before {table}": ADDED[: i + 1] for i, table in enumerate(ADDED)}


def tables(path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        db.close()


def old_store(path, missing: list[str]) -> int:
    """A store with one done trial, written as a ddtune without `missing` tables wrote it."""
    store = Store(path)
    sweep_id = store.open_sweep("old", "[sweep]", "h", PLAN)
    first = store.trials(sweep_id)[0]
    attempt, _ = store.begin_attempt(first.id)
    store.record_result(
        first.id, attempt, BenchResult.from_dict(BENCH), identity={}, timings={"bench_s": 1.0}
    )
    store.close()
    db = sqlite3.connect(path)
    for table in missing:
        db.execute(f"DROP TABLE {table}")
    db.commit()
    db.close()
    assert not tables(path) & set(missing)
    return sweep_id


@pytest.mark.parametrize("missing", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_an_earlier_store_opens_read_only_without_changes(tmp_path, missing):
    path = tmp_path / "old.sqlite"
    sweep_id = old_store(path, missing)
    reader = Store(path, read_only=True)
    try:
        assert isinstance(reader.sweep_row("old"), SweepRow)
        records = reader.trial_records(sweep_id)
        assert [r.status for r in records] == ["done", "pending"]
        assert records[0].metrics["short_tps"] == 10.5
        assert read_mode(reader, sweep_id) == NOT_RESTART_BOUND or "sweep_modes" not in missing
        assert slot_rows(reader, sweep_id) == []
    finally:
        reader.close()
    assert not tables(path) & set(missing)  # read-only added nothing


@pytest.mark.parametrize("missing", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_an_earlier_store_is_migrated_and_keeps_its_sweep(tmp_path, missing):
    path = tmp_path / "old.sqlite"
    sweep_id = old_store(path, missing)
    store = Store(path)
    try:
        assert set(missing) <= tables(path)  # the tables it lacked, added on open
        assert store.open_sweep("old", "[sweep]", "h", PLAN) == sweep_id  # resumes, same spec
        trial = store.trials(sweep_id, ("pending",))[0]
        assert isinstance(trial, TrialRow) and trial.label == trial["label"]
        attempt, number = store.begin_attempt(trial.id)
        store.record_result(
            trial.id, attempt, BenchResult.from_dict(BENCH), identity={}, timings={"bench_s": 2.0}
        )
        assert number == 1 and isinstance(store.attempts(trial.id)[0], AttemptRow)
        assert [r.status for r in store.trial_records(sweep_id)] == ["done", "done"]
        assert read_mode(store, sweep_id) == NOT_RESTART_BOUND
    finally:
        store.close()
