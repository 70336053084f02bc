"""The SQLite store: schema, transactions, recovery of trials a dead runner left running."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from ddtune.bench.result import BenchResult
from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.sweep.plan.trial_order import plan_trials
from ddtune.sweep.spec.parse import Config
from ddtune.sweep.store.db import SCHEMA_VERSION, Store

CONFIGS = [
    (Config(DecodeParams("ar").canonical()), True),
    (Config(DecodeParams("ddtree", 8, 2)), False),
]
PLAN = plan_trials(CONFIGS, repeats=2, order="interleaved")
BENCH = {
    "aggregates": {
        "short_tps": 10.5,
        "long_tps": 7.25,
        "acceptance_length": 2.5,
        "coding_passed": 3,
        "coding_total": 4,
        "extra_metric": 1.0,
    },
    "samples": [
        {"workload": "short", "index": 0, "acceptance_length": 2.0, "text": "a"},
        {"workload": "short", "index": 1, "acceptance_length": 3.0, "text": "b"},
        {"workload": "coding", "index": 0, "acceptance_length": None, "text": "c"},
    ],
    "outputs": ["a", "b", "c"],
    "logprob_gaps": [{"offsets": [0], "gaps": [0.02], "agree": 1}, None, None],
    "hardware": {"cpu": "test cpu", "cores": 2},
    "matrix": {"temperature": 0.0},
    "prompt_set_hash": "abc123",
    "identity": {"pid": 41, "target_sha256": "t0", "_source": "/server_info"},
}


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "store.sqlite")
    yield s
    s.close()


def test_schema_version_and_pragmas(store):
    assert store.db.execute("SELECT version FROM schema_version").fetchone()[0] == SCHEMA_VERSION
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_open_sweep_creates_trials_once_and_rejects_another_spec(store):
    sweep_id = store.open_sweep("s", "text", "hash1", PLAN)
    assert store.open_sweep("s", "text", "hash1", PLAN) == sweep_id
    rows = store.trials(sweep_id)
    assert [(r["label"], r["repeat"], r["status"]) for r in rows] == [
        (t.config.label(), t.repeat, "pending") for t in PLAN
    ]
    assert sorted((r["repeat"], r["label"]) for r in rows) == [
        (1, "ar"),
        (1, "ddtree b8 k2 wnone"),
        (2, "ar"),
        (2, "ddtree b8 k2 wnone"),
    ]
    rows = [r for r in rows if r["label"] != "ar"]
    assert json.loads(rows[1]["config_json"]) == {
        "mode": "ddtree",
        "budget": 8,
        "topk": 2,
        "window": "none",
    }
    assert store.trial_config(rows[0]) == CONFIGS[1][0]
    with pytest.raises(UserError, match="measured with a different spec"):
        store.open_sweep("s", "text2", "hash2", PLAN)


def test_attempt_lifecycle_and_trial_records(store):
    sweep_id = store.open_sweep("s", "text", "h", PLAN)
    first, second = store.trials(sweep_id)[:2]
    attempt, number = store.begin_attempt(first["id"])
    assert number == 1 and store.trials(sweep_id, ("running",))[0]["id"] == first["id"]
    store.fail_attempt(
        attempt,
        "crashed(1)",
        "exit 1 while loading",
        log_tail_path="/x/log_tail.txt",
        timings={"stop_to_quiet_s": 0.5},
    )
    attempt2, number2 = store.begin_attempt(first["id"])
    assert number2 == 2
    store.record_result(
        first["id"],
        attempt2,
        BenchResult.from_dict(BENCH),
        identity={"pid": 42},
        timings={"bench_s": 1.0},
        hardware=BENCH["hardware"],
    )
    a3, _ = store.begin_attempt(second["id"])
    store.fail_attempt(a3, "timeout:health", "no 200 within 5 s", log_tail_path="/y/log_tail.txt")
    store.finish_trial(second["id"], "failed")

    records = store.trial_records(sweep_id)
    done, failed = records[0], records[1]
    assert (done.status, done.attempts, done.failure, done.is_baseline) == ("done", 2, None, True)
    assert done.metrics["short_tps"] == 10.5 and done.metrics["coding_total"] == 4
    assert "extra_metric" not in done.metrics and done.metrics["long_ttft_s"] is None
    assert done.acceptance_lengths == [2.0, 3.0]
    assert done.outputs == ["a", "b", "c"]
    assert done.logprob_gaps == BENCH["logprob_gaps"]  # read back from the bench JSON
    # the server's own identity overlaid with the controller's view
    assert done.conditions["server_identity"] == {"pid": 42, "target_sha256": "t0"}
    assert done.conditions["prompt_set_hash"] == "abc123"
    assert done.conditions["hardware"] == {"cpu": "test cpu", "cores": 2}
    assert (failed.status, failed.failure, failed.failure_detail, failed.log_tail_path) == (
        "failed",
        "timeout:health",
        "no 200 within 5 s",
        "/y/log_tail.txt",
    )
    assert [r.status for r in records[2:]] == ["pending", "pending"]
    samples = store.db.execute(
        "SELECT COUNT(*) FROM samples WHERE attempt_id=?", (attempt2,)
    ).fetchone()[0]
    assert samples == 3


def test_records_carry_params_and_vars_and_read_old_stores(store):
    plan = plan_trials(
        [(Config(DecodeParams("ddtree", 8, 2, 64), (("mem", 0.8),)), False)], 1, "sequential"
    )
    sweep_id = store.open_sweep("v", "text", "h", plan)
    record = store.trial_records(sweep_id)[0]
    assert (record.params, record.vars) == (DecodeParams("ddtree", 8, 2, 64), {"mem": 0.8})
    assert record.config == {"mode": "ddtree", "budget": 8, "topk": 2, "window": 64, "mem": 0.8}
    old = json.dumps({"mode": "dflash", "budget": 0, "topk": 1, "window": None})  # before "none"
    with store.tx() as db:
        db.execute("UPDATE trials SET config_json=? WHERE sweep_id=?", (old, sweep_id))
    assert store.trial_records(sweep_id)[0].params == DecodeParams("dflash", 0, 1, None)


def test_a_failed_write_leaves_nothing_behind(store):
    sweep_id = store.open_sweep("s", "text", "h", PLAN)
    trial = store.trials(sweep_id)[0]
    attempt, _ = store.begin_attempt(trial["id"])
    bad = {**BENCH, "outputs": {1, 2}}  # a set is not JSON: the write fails midway
    with pytest.raises(TypeError):
        store.record_result(trial["id"], attempt, BenchResult.from_dict(bad))
    assert store.db.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 0
    assert store.db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 0
    assert store.trials(sweep_id)[0]["status"] == "running"
    assert store.attempts(trial["id"])[0]["state"] == "running"


def test_interrupt_after_done_keeps_the_trial_done(store):
    sweep_id = store.open_sweep("s", "text", "h", PLAN)
    trial = store.trials(sweep_id)[0]
    attempt, _ = store.begin_attempt(trial["id"])
    store.record_result(trial["id"], attempt, BenchResult.from_dict(BENCH))
    store.finish_trial(trial["id"], "interrupted")
    assert store.trials(sweep_id)[0]["status"] == "done"


def test_reset_failed_trials(store):
    sweep_id = store.open_sweep("s", "text", "h", PLAN)
    trial = store.trials(sweep_id)[1]
    attempt, _ = store.begin_attempt(trial["id"])
    store.fail_attempt(attempt, "oom", "out of memory")
    store.finish_trial(trial["id"], "failed")
    assert store.reset_trials(sweep_id, ("failed",)) == [trial["id"]]
    assert store.trials(sweep_id)[1]["status"] == "pending"
    assert len(store.attempts(trial["id"])) == 1  # history is kept


RUNNER = textwrap.dedent("""
    import os, signal, sys, time
    from ddtune.sweep.store.db import Store
    store = Store(sys.argv[1])
    store.acquire()
    trial_id = int(sys.argv[2])
    store.begin_attempt(trial_id)
    print("running", flush=True)
    time.sleep(60)
""")


def _start_runner(path, trial_id):
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(path), str(trial_id)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "running"
    return proc


def test_dead_runner_leaves_interrupted_trials_live_runner_does_not(tmp_path):
    path = tmp_path / "store.sqlite"
    with_store = Store(path)
    sweep_id = with_store.open_sweep("s", "text", "h", PLAN)
    trial_id = with_store.trials(sweep_id)[0]["id"]
    with_store.close()
    proc = _start_runner(path, trial_id)
    try:
        live = Store(path)  # the runner holds the lock: its trial stays running
        assert live.trials(sweep_id)[0]["status"] == "running"
        with pytest.raises(UserError, match="another ddtune sweep runner"):
            live.acquire()
        live.close()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    after = Store(path)
    try:
        assert after.trials(sweep_id)[0]["status"] == "interrupted"
        attempt = after.attempts(trial_id)[0]
        assert (attempt["state"], attempt["failure"]) == ("interrupted", "interrupted")
        assert attempt["ended_at"] is not None
        assert after.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        after.close()


def test_missing_store_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no sweep store"):
        Store(tmp_path / "nope.sqlite", create=False)


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "store.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE schema_version SET version = 99")
    db.commit()
    db.close()
    with pytest.raises(UserError, match="newer ddtune"):
        Store(path)


def test_a_store_from_before_the_modes_table_reads_as_not_restart_bound(tmp_path):
    from ddtune.sweep.store.modes import NOT_RESTART_BOUND, read_mode

    path = tmp_path / "old.sqlite"
    writer = Store(path)
    sweep_id = writer.open_sweep("s", "text", "h", PLAN)
    with writer.db:
        writer.db.execute("DROP TABLE sweep_modes")  # as a store written before the table
    writer.close()
    reader = Store(path, read_only=True)  # read-only: no migration adds the table back
    try:
        assert read_mode(reader, sweep_id) == NOT_RESTART_BOUND
    finally:
        reader.close()
