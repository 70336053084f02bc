"""A race through the real runner (hot `ddtune serve` on a tiny checkpoint), killed with
SIGKILL mid-pass and resumed: no finished trial is lost or redone, and every pass holds
exactly the configs the race's decisions over the stored passes before it schedule."""

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

from ddtune.services import procs
from ddtune.services.controllers.process import scope_prefix
from ddtune.sweep.plan import read_spec
from ddtune.sweep.plan.costs import race_settings
from ddtune.sweep.plan.passes import pass_results
from ddtune.sweep.plan.races.by_pass import replay
from ddtune.sweep.plan.strategies.race import Race
from ddtune.sweep.plan.trial_order import block_order
from ddtune.sweep.reporting import write_report
from ddtune.sweep.run.loop import run_sweep
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.modes import SweepMode
from ddtune.sweep.store.records import trial_records

SWEEP = """
    [sweep]
    name = "race"
    strategy = "race"
    min_repeats = 2
    repeats = 4
    seed = 3
    baseline = { mode = "ar" }
"""
SPACE = """
    [space]
    mode = ["ddtree"]
    budget = [2, 8]
    topk = [2]
"""


@pytest.mark.slow  # a hot server and ~8-12 trials: about 1-2 min on a loaded 2-core machine
@pytest.mark.parametrize("interleave", ["trial", "request"])
def test_race_sigkill_resume_decides_as_uninterrupted(
    tmp_path, tiny_models, spec_writer, interleave
):
    sweep = SWEEP + f'    interleave = "{interleave}"\n'
    spec_path = spec_writer(tmp_path, tiny_models, sweep, SPACE, service='control = "hot"')
    spec = read_spec(spec_path)
    store_path = tmp_path / "runs" / "store.sqlite"
    try:
        child = _runner(spec_path, store_path, tmp_path / "runner.log")
        # mid pass 2 (3 configs per pass; a request-interleaved pass finishes all at once)
        least = 4 if interleave == "trial" else 3
        _wait_for_done(store_path, least, child)
        if interleave == "request":  # into pass 2: its 3 attempts are running
            _wait_for_count(store_path, "attempts WHERE state='running'", 3, child)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        _kill_leftovers(store_path.parent)
        before = _done_attempts(store_path)
        assert len(before) >= least

        with open(tmp_path / "out.txt", "w") as out:
            summary = run_sweep(spec, store_path, Console(file=out, width=200))
        assert not summary.interrupted
        after = _done_attempts(store_path)
        assert {t: after[t] for t in before} == before  # nothing lost, nothing redone
        if interleave == "request":  # the killed pass was rerun whole
            assert _interrupted_attempts(store_path) == 3
        _assert_passes_follow_the_decisions(spec, store_path)
        _assert_report_carries_the_race(store_path, tmp_path / "report")
    finally:
        _kill_leftovers(store_path.parent)


def _assert_passes_follow_the_decisions(spec, store_path: Path) -> None:
    store = Store(store_path)
    try:
        sweep_id = store.sweep_row("race")["id"]
        records = trial_records(store, sweep_id)
        labels = [c.label() for c, _ in spec.all_configs()]
        passes = pass_results(records, "throughput", 1, store.trial_seconds(sweep_id))
        assert len(passes) == max(r.repeat for r in records)  # every pass finished
        settings = race_settings(spec)
        for n in range(1, len(passes) + 1):
            state = replay(labels, "ar", passes[: n - 1], settings)
            ran = [r.label for r in sorted(records, key=lambda r: r.trial_id) if r.repeat == n]
            assert state.stop is None  # no pass ran after the race stopped
            assert ran == block_order(state.scheduled(), spec.seed, n)  # same configs, same order
        final = Race(spec, SweepMode(False, "")).state(store, sweep_id)
        assert final.stop is not None and final.scheduled() == []
    finally:
        store.close()


def _assert_report_carries_the_race(store_path: Path, out: Path) -> None:
    store = Store(store_path, create=False)
    try:
        with open(os.devnull, "w") as sink:
            write_report(store, store.sweep_row("race"), out, Console(file=sink))
    finally:
        store.close()
    data = json.loads((out / "results.json").read_text())
    assert data["report"]["context"]["strategy"] == "race"
    assert data["report"]["context"]["stop"] is not None
    statuses = {r["status"] for r in data["report"]["recommendations"]}
    assert statuses <= {"separated", "equivalent", "inconclusive", "no data"}
    for config in data["report"]["configs"]:
        assert "eliminated_at_pass" in config and "elimination_reason" in config


def _runner(spec_path: Path, store_path: Path, log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "ddtune.cli", "sweep", "run", str(spec_path)]
    with open(log, "a") as out:
        return subprocess.Popen([*cmd, "--store", str(store_path)], stdout=out, stderr=out)


def _wait_for_done(store_path: Path, count: int, child: subprocess.Popen) -> None:
    _wait_for_count(store_path, "trials WHERE status='done'", count, child)


def _wait_for_count(
    store_path: Path, rows: str, count: int, child: subprocess.Popen, timeout: float = 300
) -> None:
    """Until `SELECT COUNT(*) FROM {rows}` reaches `count` (the runner still running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert child.poll() is None, "the runner ended before it could be killed"
        if store_path.exists():
            store = Store(store_path)
            try:
                found = store.db.execute(f"SELECT COUNT(*) FROM {rows}").fetchone()[0]
            finally:
                store.close()
            if found >= count:
                return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} of {rows} within {timeout} s")


def _interrupted_attempts(store_path: Path) -> int:
    store = Store(store_path)
    try:
        query = "SELECT COUNT(*) FROM attempts WHERE state='interrupted'"
        return int(store.db.execute(query).fetchone()[0])
    finally:
        store.close()


def _done_attempts(store_path: Path) -> dict[int, tuple]:
    store = Store(store_path)
    try:
        rows = store.db.execute(
            "SELECT t.id, a.id, a.started_at, a.ended_at FROM trials t JOIN results r"
            " ON r.trial_id = t.id JOIN attempts a ON a.id = r.attempt_id"
        )
        return {row[0]: tuple(row[1:]) for row in rows}
    finally:
        store.close()


def _kill_leftovers(workdir: Path) -> None:
    for info in procs.find_instance(tag=scope_prefix(workdir), tag_prefix=True):
        os.kill(info.pid, signal.SIGKILL)


@pytest.mark.slow  # two server starts, four benches
def test_passes_per_start_bench_one_start_twice(tmp_path, tiny_models, spec_writer):
    sweep = '[sweep]\nname = "pps"\nrepeats = 2\npasses_per_start = 2\n'
    configs = '[[configs]]\nmode = "ddtree"\nbudget = 4\ntopk = 2\n[[configs]]\nmode = "ar"\n'
    spec = read_spec(spec_writer(tmp_path, tiny_models, sweep, configs))
    store_path = tmp_path / "runs" / "store.sqlite"
    try:
        with open(tmp_path / "out.txt", "w") as out:
            summary = run_sweep(spec, store_path, Console(file=out, width=200))
        assert summary.done == 4
        store = Store(store_path)
        try:
            rows = store.db.execute(
                "SELECT t.label, t.repeat, a.timings_json, a.identity_json FROM trials t"
                " JOIN attempts a ON a.trial_id = t.id ORDER BY t.order_index"
            ).fetchall()
            records = trial_records(store, store.sweep_row("pps")["id"])
        finally:
            store.close()
        assert [(r[0], r[1]) for r in rows[:2]] == [(rows[0][0], 1), (rows[0][0], 2)]
        for first, second in (rows[0:2], rows[2:4]):
            assert "start_to_ready_s" in json.loads(first[2])
            reused = json.loads(second[2])
            assert reused["reused_start"] == 1.0 and "start_to_ready_s" not in reused  # no restart
            assert json.loads(first[3]) == json.loads(second[3])  # the same server instance
        ids = {r.label: set() for r in records}
        for r in records:
            ids[r.label].add(r.conditions["server_identity"].get("instance_id"))
        assert all(len(v) == 1 for v in ids.values())
    finally:
        _kill_leftovers(store_path.parent)
