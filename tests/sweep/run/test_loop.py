"""The runner end to end: real `ddtune serve` subprocesses on a random tiny checkpoint,
the real bench, the SQLite store; a crashing config; SIGTERM and SIGKILL mid-trial, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from ddtune.cli import main
from ddtune.services import procs
from ddtune.services.controllers.process import scope_prefix
from ddtune.sweep.plan import read_spec
from ddtune.sweep.run.loop import run_sweep
from ddtune.sweep.store.db import Store

SWEEP = """
    [sweep]
    name = "tiny"
    repeats = 2
    order = "interleaved"
"""
GOOD_AND_CRASHING = """
    [[configs]]
    mode = "ddtree"
    budget = 4
    topk = 2
    window = 16

    [[configs]]          # `ddtune serve --max-queue bogus` exits 2: crashed(2)
    mode = "ddtree"
    budget = 8
    topk = 2
    vars = { queue = "bogus" }
"""
ONE_CONFIG = """
    [[configs]]
    mode = "ddtree"
    budget = 4
    topk = 2
"""


def _kill_leftovers(workdir: Path) -> None:
    for info in procs.find_instance(tag=scope_prefix(workdir), tag_prefix=True):
        os.kill(info.pid, signal.SIGKILL)


def _leftovers(workdir: Path, port: int) -> list:
    """Server processes of this sweep still alive, and listeners on its port."""
    return procs.find_instance(tag=scope_prefix(workdir), tag_prefix=True) + list(
        procs.port_listeners(port)
    )


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_models, spec_writer):
    """One sweep run to the end: a good config and a crashing one (2 attempts)."""
    folder = tmp_path_factory.mktemp("e2e")
    sweep = SWEEP.replace("repeats = 2", "repeats = 1")  # ordering: see test_plan.py
    spec = read_spec(spec_writer(folder, tiny_models, sweep, GOOD_AND_CRASHING, attempts=2))
    store_path = folder / "runs" / "store.sqlite"
    with open(folder / "out.txt", "w") as out:
        summary = run_sweep(spec, store_path, Console(file=out, width=200))
    return spec, store_path, summary, folder


def test_sweep_runs_good_configs_and_records_the_crashing_one(finished):
    spec, store_path, summary, folder = finished
    assert (summary.planned, summary.done, summary.failed, summary.interrupted) == (2, 1, 1, False)
    assert summary.exit_code == 1 and summary.failure_classes == {"crashed(2)": 1}
    store = Store(store_path, create=False)
    try:
        records = store.trial_records(store.sweep_row()["id"])
        by_status = {r.label: r.status for r in records}
        assert by_status == {
            "ddtree b4 k2 w16": "done",
            "ddtree b8 k2 wnone queue=bogus": "failed",
        }
        for record in records:
            if record.status == "done":
                assert record.attempts == 1
                assert record.metrics["short_tps"] > 0 and record.metrics["long_tps"] > 0
                assert record.metrics["coding_total"] == 1
                assert len(record.outputs) == 3  # short, long, coding
                assert record.conditions["hardware_fingerprint"]
                assert record.conditions["server_identity"]["pid"] > 0
            else:
                assert record.attempts == 2  # retried per [retry]
                assert record.failure == "crashed(2)"
                assert "exited with code 2" in record.failure_detail
                assert "invalid int value: 'bogus'" in Path(record.log_tail_path).read_text()
        ddtree = [r for r in records if r.label.startswith("ddtree b4")]
        assert all(r.acceptance_lengths and min(r.acceptance_lengths) >= 1 for r in ddtree)
        # interleaved: every config once per pass
        timings = json.loads(store.attempts(records[0].trial_id)[0]["timings_json"])
        assert timings["start_to_ready_s"] > 0 and timings["bench_s"] > 0
    finally:
        store.close()
    out = (folder / "out.txt").read_text()
    assert "crashed(2)" in out and "log:" in out and "skip" not in out.lower()
    assert _leftovers(store_path.parent, spec.service.port) == []


def test_status_export_and_report_commands(finished, capsys):
    _, store_path, _, folder = finished
    store = str(store_path)
    assert main(["sweep", "status", "--store", store]) == 0
    status = capsys.readouterr().out
    assert "1 done, 1 failed" in status and "crashed(2)" in status and "log_tail.txt" in status
    csv_path = folder / "export.csv"
    assert (
        main(["sweep", "export", "--format", "csv", "--store", store, "--out", str(csv_path)]) == 0
    )
    lines = csv_path.read_text().splitlines()
    assert len(lines) == 3 and "short_tps" in lines[0] and "queue" in lines[0]
    capsys.readouterr()
    assert main(["sweep", "export", "--format", "json", "--store", store]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["trials"]) == 2 and doc["trials"][1]["attempt_history"][1]["number"] == 2
    assert main(["sweep", "report", "--store", store, "--out", str(folder / "report")]) == 0
    assert (folder / "report" / "report.html").is_file()
    assert "report.html" in capsys.readouterr().out
    assert main(["sweep", "status", "--store", str(folder / "nothing.sqlite")]) == 2
    assert "no sweep store" in capsys.readouterr().err


def test_retry_failed_reruns_only_the_failed_trials(finished, capsys):
    spec, store_path, _, _ = finished
    store = Store(store_path, create=False)
    before = {r["id"]: (r["status"], len(store.attempts(r["id"]))) for r in store.trials(1)}
    store.close()
    assert main(["sweep", "retry", "--failed", "--store", str(store_path)]) == 1  # fails again
    assert "reopened 1 failed trial(s)" in capsys.readouterr().err
    store = Store(store_path, create=False)
    try:
        after = {r["id"]: (r["status"], len(store.attempts(r["id"]))) for r in store.trials(1)}
    finally:
        store.close()
    for trial_id, (status, attempts) in before.items():
        if status == "done":
            assert after[trial_id] == (status, attempts)  # untouched
        else:
            assert after[trial_id] == ("failed", attempts + spec.retry.attempts)  # a new round


def _runner(spec_path: Path, store_path: Path, log: Path) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "ddtune.cli",
        "sweep",
        "run",
        str(spec_path),
        "--store",
        str(store_path),
    ]
    with open(log, "a") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)


def _wait_until_running(
    store_path: Path, after_done: int, ready: bool, timeout: float = 120.0
) -> int:
    """Wait for a running trial once `after_done` are done (and its server READY); its id."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if store_path.exists():
            store = Store(store_path)
            try:
                found = store.db.execute(
                    "SELECT t.id, a.identity_json FROM trials t JOIN attempts a ON a.trial_id = t.id"
                    " WHERE t.status = 'running' AND a.state = 'running'"
                ).fetchone()
                done = store.db.execute(
                    "SELECT COUNT(*) FROM trials WHERE status='done'"
                ).fetchone()[0]
            finally:
                store.close()
            if found and done >= after_done and (not ready or json.loads(found[1])):
                return found[0]
        time.sleep(0.2)
    raise AssertionError(f"no trial was running after {after_done} done within {timeout} s")


def _attempt_rows(store_path: Path) -> dict[int, list[tuple]]:
    store = Store(store_path)
    try:
        rows = store.db.execute(
            "SELECT trial_id, id, number, state, started_at, ended_at FROM attempts"
        )
        out: dict[int, list[tuple]] = {}
        for row in rows:
            out.setdefault(row[0], []).append(tuple(row))
        return out
    finally:
        store.close()


@pytest.mark.slow  # about 80 s on a loaded 2-core machine: 4 server starts
def test_sigterm_then_sigkill_mid_trial_then_resume(tmp_path, tiny_models, spec_writer):
    sweep = SWEEP.replace("interleaved", "sequential")
    spec_path = spec_writer(tmp_path, tiny_models, sweep, ONE_CONFIG)
    spec = read_spec(spec_path)
    store_path = tmp_path / "runs" / "store.sqlite"
    log = tmp_path / "runner.log"
    try:
        # 1. SIGTERM during trial 2: trial interrupted, service stopped, exit 3 with a hint
        proc = _runner(spec_path, store_path, log)
        second = _wait_until_running(store_path, after_done=1, ready=False)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 3
        assert "resume with: ddtune sweep run" in log.read_text()
        assert _leftovers(store_path.parent, spec.service.port) == []
        first_rows = _attempt_rows(store_path)
        first = next(t for t in first_rows if t != second)
        assert [a[3] for a in first_rows[first]] == ["done"]
        assert [a[3] for a in first_rows[second]] == ["interrupted"]

        # 2. resume; SIGKILL while trial 2 benchmarks: no cleanup, the server outlives the runner
        proc = _runner(spec_path, store_path, log)
        assert _wait_until_running(store_path, after_done=1, ready=True) == second
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert _leftovers(store_path.parent, spec.service.port) != []  # a stray server, for now
        store = Store(store_path)  # the dead runner's lock is gone: running → interrupted
        try:
            assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert {r["id"]: r["status"] for r in store.trials(1)} == {
                first: "done",
                second: "interrupted",
            }
            assert [tuple(r) for r in store.db.execute("SELECT trial_id FROM results")] == [
                (first,)
            ]
        finally:
            store.close()
        middle = _attempt_rows(store_path)
        assert middle[first] == first_rows[first]
        assert [a[3] for a in middle[second]] == ["interrupted", "interrupted"]

        # 3. resume to the end: the stray server is stopped, trial 1 is not redone
        with open(tmp_path / "out.txt", "w") as out:
            summary = run_sweep(spec, store_path, Console(file=out))
        assert (summary.interrupted, summary.done, summary.already_done) == (False, 1, 1)
        after = _attempt_rows(store_path)
        assert after[first] == first_rows[first]  # same attempt row, same timestamps
        assert [a[3] for a in after[second]] == ["interrupted", "interrupted", "done"]
        assert _leftovers(store_path.parent, spec.service.port) == []
    finally:  # a failed assertion must not leave the stray server running
        _kill_leftovers(store_path.parent)
