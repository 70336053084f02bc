"""The distributed driver (SlotLoop) on a thread-backed pool: scheduling, faults, status.

The slots here are real `SlotRunner`s (a process controller, the readiness
protocol, the bench) against sleepy_server.py; only the transport is threads
instead of Ray actors (test_ray.py covers Ray itself)."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import threading
import time

import pytest
from rich.console import Console

import ddtune.sweep.run.ray.driver as dispatch
from ddtune.errors import UserError
from ddtune.services.controllers.process import scope_prefix
from ddtune.services.procs import find_instance
from ddtune.sweep.export import export_json
from ddtune.sweep.plan import read_spec
from ddtune.sweep.run.common import EXIT_BLOCKED, EXIT_FAILED, EXIT_INTERRUPTED
from ddtune.sweep.run.loop import run_sweep
from ddtune.sweep.status import status_table
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.slot_tables import slot_rows


def quiet() -> Console:
    return Console(file=io.StringIO(), width=200)


def outcome_of(store_path):
    """{(label, repeat): (status, outputs)} plus attempts and slots per trial."""
    store = Store(store_path, create=False)
    try:
        sweep = store.sweep_row()
        trials = {}
        for record in store.trial_records(sweep["id"]):
            attempts = store.attempts(record.trial_id)
            slots = [
                store.db.execute(
                    "SELECT slot FROM attempt_slots WHERE attempt_id=?", (a["id"],)
                ).fetchone()
                for a in attempts
            ]
            trials[(record.label, record.repeat)] = {
                "status": record.status,
                "outputs": record.outputs,
                "attempts": [(a["state"], a["failure"]) for a in attempts],
                "slots": [s[0] if s else None for s in slots],
                "results": store.db.execute(
                    "SELECT COUNT(*) FROM results WHERE trial_id=?", (record.trial_id,)
                ).fetchone()[0],
                "conditions": record.conditions,
            }
        return trials, [dict(r) for r in slot_rows(store, sweep["id"])]
    finally:
        store.close()


def leftovers(root, slot: str) -> list[int]:
    return [p.pid for p in find_instance(tag=scope_prefix(root / "slots" / slot), tag_prefix=True)]


def test_two_slots_by_pass_match_the_local_backend(tmp_path, sleepy_spec, thread_pool):
    local_dir, ray_dir = tmp_path / "local", tmp_path / "ray"
    local_dir.mkdir(), ray_dir.mkdir()
    local = run_sweep(
        read_spec(sleepy_spec(local_dir, backend="local")), local_dir / "s.sqlite", quiet()
    )
    pools = thread_pool()
    summary = run_sweep(read_spec(sleepy_spec(ray_dir)), ray_dir / "s.sqlite", quiet())
    assert (local.done, summary.done, summary.failed) == (4, 4, 0)
    want, _ = outcome_of(local_dir / "s.sqlite")
    got, slots = outcome_of(ray_dir / "s.sqlite")
    assert set(got) == set(want)
    for key, trial in got.items():
        assert trial["status"] == "done" and trial["outputs"] == want[key]["outputs"]
        assert trial["outputs"], "T=0 outputs recorded"
        assert trial["conditions"]["slot"] == trial["slots"][0]
        assert want[key]["slots"] == [None]  # the local backend records no slot
    by_pass = {r: {t["slots"][0] for (_, rep), t in got.items() if rep == r} for r in (1, 2)}
    assert by_pass[1] != by_pass[2] and all(len(s) == 1 for s in by_pass.values())
    assert {r["name"]: (r["state"], r["done"]) for r in slots} == {
        "s0": ("stopped", 2),
        "s1": ("stopped", 2),
    }
    assert not leftovers(ray_dir, "s0") and not leftovers(ray_dir, "s1")
    assert pools[0].killed == []


def test_by_trial_spreads_one_pass_over_both_slots(tmp_path, sleepy_spec, thread_pool):
    thread_pool()
    spec = read_spec(sleepy_spec(tmp_path, repeats=1, cluster='schedule = "by_trial"'))
    assert run_sweep(spec, tmp_path / "s.sqlite", quiet()).done == 2
    got, _ = outcome_of(tmp_path / "s.sqlite")
    assert {t["slots"][0] for t in got.values()} == {"s0", "s1"}


def test_a_lost_slot_is_retired_and_its_trial_finishes_elsewhere(
    tmp_path, sleepy_spec, thread_pool
):
    pools = thread_pool(kill_when=lambda slot, phase: slot == "s1" and phase == "benchmarking")
    out = io.StringIO()
    summary = run_sweep(read_spec(sleepy_spec(tmp_path)), tmp_path / "s.sqlite", Console(file=out))
    assert pools[0].killed == ["s1"]
    assert (summary.done, summary.failed) == (4, 0)
    got, slots = outcome_of(tmp_path / "s.sqlite")
    assert all(t["status"] == "done" and t["results"] == 1 for t in got.values())  # 0 lost, 0 twice
    lost = [t for t in got.values() if ("failed", "node_lost") in t["attempts"]]
    assert len(lost) == 1
    assert lost[0]["attempts"] == [("failed", "node_lost"), ("done", None)]
    assert lost[0]["slots"] == ["s1", "s0"]
    assert {r["name"]: r["state"] for r in slots} == {"s0": "stopped", "s1": "stopped"}
    assert "lost during 'benchmarking'" in out.getvalue()
    assert not leftovers(tmp_path, "s1") and not leftovers(tmp_path, "s0")


def test_a_retired_slot_rejoins(tmp_path, sleepy_spec, thread_pool, monkeypatch):
    monkeypatch.setattr(dispatch, "REJOIN_EVERY_S", 0.1)
    thread_pool(kill_when=lambda slot, phase: slot == "s1" and phase == "benchmarking", rejoin=True)
    spec = read_spec(sleepy_spec(tmp_path, repeats=3))
    assert run_sweep(spec, tmp_path / "s.sqlite", quiet()).done == 6
    got, _ = outcome_of(tmp_path / "s.sqlite")
    done_on = [t["slots"][-1] for t in got.values()]
    assert "s1" in done_on[2:] and all(t["results"] == 1 for t in got.values())


def test_fewer_live_slots_than_min_slots_stops_the_sweep(tmp_path, sleepy_spec, thread_pool):
    thread_pool(kill_when=lambda slot, phase: slot == "s1" and phase == "benchmarking")
    spec = read_spec(sleepy_spec(tmp_path, cluster="min_slots = 2"))
    with pytest.raises(UserError, match=r"only 1 live slot\(s\), fewer than cluster.min_slots = 2"):
        run_sweep(spec, tmp_path / "s.sqlite", quiet())
    got, slots = outcome_of(tmp_path / "s.sqlite")
    assert {t["status"] for t in got.values()} <= {"done", "pending", "interrupted"}
    assert "running" not in {t["status"] for t in got.values()}
    assert all(r["state"] == "stopped" for r in slots)
    assert not leftovers(tmp_path, "s0") and not leftovers(tmp_path, "s1")


def test_failed_attempts_retry_on_their_slot_then_fail(tmp_path, sleepy_spec, thread_pool):
    thread_pool()
    bad = '[[configs]]\nmode = "ddtree"\nbudget = 4\ntopk = 2\nvars = { delay = "bogus" }\n'
    spec = read_spec(sleepy_spec(tmp_path, budgets=(), configs=bad, repeats=1))
    summary = run_sweep(spec, tmp_path / "s.sqlite", quiet())
    assert (summary.done, summary.failed) == (0, 1)
    (trial,) = outcome_of(tmp_path / "s.sqlite")[0].values()
    assert trial["status"] == "failed"
    assert [f for _, f in trial["attempts"]] == ["crashed(2)", "crashed(2)"]
    assert len(set(trial["slots"])) == 1  # the retry stays on its slot
    assert "crashed(2)" in summary.failures[0]


def test_status_shows_each_slot(tmp_path, sleepy_spec, thread_pool):
    thread_pool()
    run_sweep(read_spec(sleepy_spec(tmp_path, repeats=1)), tmp_path / "s.sqlite", quiet())
    store = Store(tmp_path / "s.sqlite", create=False)
    try:
        console = Console(file=io.StringIO(), width=200)
        console.print(status_table(store, store.sweep_row()))
        text = console.file.getvalue()
        export = json.loads(export_json(store, store.sweep_row()))
    finally:
        store.close()
    assert "slots" in text and "s0" in text and "s1" in text and "stopped" in text
    assert export["trials"][0]["conditions"]["slot"] in ("s0", "s1")


def test_sigterm_interrupts_the_trials_in_flight_and_closes_every_slot(
    tmp_path, sleepy_spec, thread_pool
):
    pools = thread_pool()

    def terminate_when_both_slots_bench() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            runners = pools[0].runners if pools else {}
            phases = [r.state()["phase"] for r in runners.values()]
            if len(phases) == 2 and all(p == "benchmarking" for p in phases):
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=terminate_when_both_slots_bench)
    killer.start()
    summary = run_sweep(read_spec(sleepy_spec(tmp_path)), tmp_path / "s.sqlite", quiet())
    killer.join()
    assert summary.interrupted and summary.exit_code == EXIT_INTERRUPTED
    got, slots = outcome_of(tmp_path / "s.sqlite")
    statuses = sorted(t["status"] for t in got.values())
    assert statuses.count("interrupted") == 2 and "running" not in statuses
    assert all(r["state"] == "stopped" for r in slots)
    assert not leftovers(tmp_path, "s0") and not leftovers(tmp_path, "s1")


FAILING = "".join(  # five configs whose server exits 2 on its arguments: crashed(2)
    f'[[configs]]\nmode = "ddtree"\nbudget = {b}\ntopk = 2\nvars = {{ delay = "bogus" }}\n'
    for b in (2, 4, 6, 8, 10)
)
BASELINE = 'baseline = { mode = "ar" }'


def test_the_breaker_starts_a_control_on_a_slot_and_the_sweep_goes_on(
    tmp_path, sleepy_spec, thread_pool
):
    """Configs that fail on their own: the control start of the baseline is READY."""
    thread_pool()
    out = io.StringIO()
    spec = read_spec(sleepy_spec(tmp_path, budgets=(), configs=FAILING, repeats=1, sweep=BASELINE))
    summary = run_sweep(spec, tmp_path / "s.sqlite", Console(file=out, width=200))
    text = " ".join(out.getvalue().split())
    assert (summary.done, summary.failed, summary.exit_code) == (1, 5, EXIT_FAILED), text
    assert "breaker: starting the baseline as a control" in text
    assert "the baseline is READY, so these configs fail on their own" in text
    assert "whatever the config" not in text and summary.broken is None
    assert any((tmp_path / "control").iterdir())  # the control's folder
    _, slots = outcome_of(tmp_path / "s.sqlite")
    assert all(r["state"] == "stopped" for r in slots)
    assert not leftovers(tmp_path, "s0") and not leftovers(tmp_path, "s1")


def test_the_breaker_stops_a_sweep_whose_service_fails_whatever_the_config(
    tmp_path, sleepy_spec, thread_pool
):
    thread_pool()
    spec = read_spec(
        sleepy_spec(
            tmp_path, budgets=(), configs=FAILING, repeats=1, sweep=BASELINE, token_delay="bogus"
        )
    )
    summary = run_sweep(spec, tmp_path / "s.sqlite", quiet())
    assert summary.exit_code == EXIT_FAILED and not summary.interrupted and not summary.blocked
    assert summary.broken and "the service fails whatever the config: crashed(2)" in summary.broken
    got, slots = outcome_of(tmp_path / "s.sqlite")
    statuses = {t["status"] for t in got.values()}
    assert "failed" not in statuses and "running" not in statuses  # the streak reopened
    assert all(r["state"] == "stopped" for r in slots)
    assert not leftovers(tmp_path, "s0") and not leftovers(tmp_path, "s1")


def test_a_port_held_by_a_foreign_process_stops_the_sweep_with_exit_4(
    tmp_path, sleepy_spec, thread_pool
):
    thread_pool()
    spec = read_spec(sleepy_spec(tmp_path))
    port = next(s.service.port for s in spec.cluster.slots if s.name == "s0")
    with socket.socket() as squatter:  # this test process: not a ddtune process, never stopped
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        summary = run_sweep(spec, tmp_path / "s.sqlite", quiet())
    assert summary.exit_code == EXIT_BLOCKED and not summary.interrupted, summary
    assert summary.blocked and summary.blocked.startswith("slot s0: port_in_use — ")
    got, slots = outcome_of(tmp_path / "s.sqlite")
    statuses = [t["status"] for t in got.values()]
    assert "interrupted" in statuses and "running" not in statuses and "failed" not in statuses
    blocked = [t for t in got.values() if ("failed", "port_in_use") in t["attempts"]]
    assert [t["slots"] for t in blocked] == [["s0"]]
    assert all(r["state"] == "stopped" for r in slots)
    assert not leftovers(tmp_path, "s0") and not leftovers(tmp_path, "s1")
