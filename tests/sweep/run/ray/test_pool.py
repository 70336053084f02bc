"""The ray backend on a local Ray cluster (one session for the module, 2 CPUs, no dashboard).

Slow: starting Ray on this machine takes 10-20 s, and each sweep is real
(sleepy_server.py services started and stopped by each slot's actor)."""

from __future__ import annotations

import io
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

import ddtune.sweep.run.ray.driver as dispatch
from ddtune.errors import UserError
from ddtune.services.controllers.process import scope_prefix
from ddtune.services.procs import find_instance, is_alive
from ddtune.sweep.plan import read_spec
from ddtune.sweep.run.loop import run_sweep

pytestmark = pytest.mark.slow


def quiet() -> Console:
    return Console(file=io.StringIO(), width=200)


def leftovers(root: Path, slot: str) -> list[int]:
    return [p.pid for p in find_instance(tag=scope_prefix(root / "slots" / slot), tag_prefix=True)]


def rows(store: Path, sql: str) -> list[tuple]:
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=30)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def span(store: Path) -> float:
    """First attempt start to last attempt end: the trial loop, without start-up and close."""
    ((start, end),) = rows(store, "SELECT MIN(started_at), MAX(ended_at) FROM attempts")
    return end - start


def outputs(store: Path) -> dict[tuple[str, int], str]:
    found = rows(
        store,
        "SELECT t.label, t.repeat, r.outputs_json FROM trials t JOIN results r ON r.trial_id = t.id",
    )
    return {(label, repeat): text for label, repeat, text in found}


def test_two_ray_slots_give_the_local_results_in_at_most_0_6_of_the_time(
    tmp_path, sleepy_spec, ray_session
):
    local, ray = tmp_path / "local", tmp_path / "ray"
    local.mkdir(), ray.mkdir()
    started = time.monotonic()
    run_sweep(read_spec(sleepy_spec(local, backend="local")), local / "s.sqlite", quiet())
    local_wall = time.monotonic() - started
    started = time.monotonic()
    summary = run_sweep(read_spec(sleepy_spec(ray)), ray / "s.sqlite", quiet())
    ray_wall = time.monotonic() - started
    assert (summary.done, summary.failed) == (4, 0)
    assert outputs(ray / "s.sqlite") == outputs(local / "s.sqlite")  # same trials, same T=0 text
    assert len(outputs(ray / "s.sqlite")) == 4
    ratio = span(ray / "s.sqlite") / span(local / "s.sqlite")
    print(f"trial loop ray/local = {ratio:.2f}; whole run {ray_wall:.1f} s vs {local_wall:.1f} s")
    assert ratio <= 0.6
    slots = rows(ray / "s.sqlite", "SELECT DISTINCT node, slot FROM attempt_slots")
    assert {s for _, s in slots} == {"s0", "s1"} and all(n for n, _ in slots)
    assert not leftovers(ray, "s0") and not leftovers(ray, "s1")


def test_a_placement_no_node_satisfies_names_the_slot(tmp_path, sleepy_spec, ray_session):
    cluster = 'address = "local"\n'
    spec = sleepy_spec(tmp_path, slots=2, cluster=cluster)
    text = spec.read_text().replace(
        'name = "s1"\n', 'name = "s1"\nplacement = { resources = { gpu_group_z = 1 } }\n'
    )
    spec.write_text(text)
    with pytest.raises(UserError, match=r"no live Ray node satisfies slot 's1'") as caught:
        run_sweep(read_spec(spec), tmp_path / "s.sqlite", quiet())
    assert caught.value.key == "cluster.slots.1.placement"
    assert rows(tmp_path / "s.sqlite", "SELECT COUNT(*) FROM attempts") == [(0,)]


def kill_slot_when_benchmarking(
    store: Path, root: Path, slot: str, killed: list, with_service: bool = True
) -> None:
    """From a thread: SIGKILL the slot's actor (and its service) once its bench runs."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not killed:
        try:
            found = rows(store, f"SELECT pid, phase FROM slots WHERE name='{slot}'")
        except sqlite3.OperationalError:
            found = []
        if found and found[0][1] == "benchmarking":
            servers = leftovers(root, slot)
            for pid in [found[0][0], *(servers if with_service else ())]:
                os.kill(pid, signal.SIGKILL)
            killed.append((found[0][0], servers))
        time.sleep(0.05)


@pytest.mark.parametrize("with_service", [True, False], ids=["actor+service", "actor"])
def test_killing_a_slot_actor_mid_trial_loses_nothing(
    tmp_path, sleepy_spec, ray_session, monkeypatch, with_service
):
    """Actor and service killed (a node gone), or the actor alone: then its orphan service
    is stopped by the slot's next actor (no rejoin here: at close)."""
    if not with_service:
        monkeypatch.setattr(dispatch, "REJOIN_EVERY_S", 3600.0)
    spec = read_spec(sleepy_spec(tmp_path, token_delay=0.1))
    killed: list = []
    killer = threading.Thread(
        target=kill_slot_when_benchmarking,
        args=(tmp_path / "s.sqlite", tmp_path, "s1", killed, with_service),
    )
    killer.start()
    out = io.StringIO()
    summary = run_sweep(spec, tmp_path / "s.sqlite", Console(file=out, width=200))
    killer.join()
    assert killed, "the slot was killed mid-trial"
    actor_pid, servers = killed[0]
    assert servers, "its service was running"
    assert (summary.done, summary.failed) == (4, 0)
    store = tmp_path / "s.sqlite"
    assert rows(store, "SELECT status, COUNT(*) FROM trials GROUP BY status") == [("done", 4)]
    assert rows(store, "SELECT COUNT(*), COUNT(DISTINCT trial_id) FROM results") == [(4, 4)]
    lost = rows(
        store,
        "SELECT a.trial_id, s.slot FROM attempts a JOIN attempt_slots s ON s.attempt_id = a.id"
        " WHERE a.failure = 'node_lost'",
    )
    assert [slot for _, slot in lost] == ["s1"]
    done_on = rows(
        store,
        "SELECT s.slot FROM results r JOIN attempt_slots s ON s.attempt_id = r.attempt_id"
        f" WHERE r.trial_id = {lost[0][0]}",
    )
    assert done_on == [("s0",)] or done_on == [("s1",)]  # on s0, or on s1 after it rejoined
    assert not is_alive(actor_pid) and not any(is_alive(pid) for pid in servers)
    if not with_service:
        assert "leftover process(es)" in out.getvalue()
    assert not leftovers(tmp_path, "s1") and not leftovers(tmp_path, "s0")
    assert "lost during 'benchmarking'" in out.getvalue()


def test_a_killed_driver_resumes_and_reclaims_every_slot(tmp_path, sleepy_spec, ray_session):
    """The driver, its Ray cluster and the slot actors all die at once (SIGKILL, as when
    the driver's machine goes down): the services they started are orphans until a new
    driver's slots stop them; finished trials stay finished."""
    spec = sleepy_spec(tmp_path, token_delay=0.1)
    store = tmp_path / "s.sqlite"
    env = {**os.environ, "PYTHONPATH": str(Path("src").resolve())}
    argv = [sys.executable, "-m", "ddtune.cli", "sweep", "run", str(spec), "--store", str(store)]
    driver = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    actors: list[int] = []
    try:
        actors = wait_for_a_done_trial_and_a_busy_slot(store)
        finished_before = rows(store, "SELECT trial_id, attempt_id FROM results")
    finally:
        os.killpg(driver.pid, signal.SIGKILL)  # the driver and the Ray cluster it started
        for pid in actors:
            os.kill(pid, signal.SIGKILL)
        driver.wait()
    time.sleep(1.0)
    orphans = leftovers(tmp_path, "s0") + leftovers(tmp_path, "s1")
    assert orphans, "the killed driver left services running"
    out = io.StringIO()
    summary = run_sweep(read_spec(spec), store, Console(file=out, width=200))
    assert summary.done + len(finished_before) == 4 and summary.failed == 0
    kept = rows(store, "SELECT trial_id, attempt_id FROM results")
    assert set(finished_before) <= set(kept) and len(kept) == 4  # none lost, none redone
    assert "leftover process(es)" in out.getvalue()
    assert not any(is_alive(pid) for pid in orphans)
    assert not leftovers(tmp_path, "s0") and not leftovers(tmp_path, "s1")


def wait_for_a_done_trial_and_a_busy_slot(store: Path) -> list[int]:
    """Poll the store until one trial is done and a slot benchmarks; the actor pids."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            done = rows(store, "SELECT COUNT(*) FROM results")[0][0]
            busy = rows(store, "SELECT pid FROM slots WHERE phase='benchmarking'")
        except sqlite3.OperationalError:  # not created yet
            continue
        if done and busy:
            return [pid for (pid,) in rows(store, "SELECT pid FROM slots WHERE pid IS NOT NULL")]
    raise AssertionError("no trial finished while a slot was busy within 180 s")
