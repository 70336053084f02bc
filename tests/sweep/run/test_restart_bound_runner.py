"""A restart-bound race through the real runner, killed with SIGKILL while a server starts,
then resumed: no finished trial is lost or redone, the killed start runs again, and every
stored trial is exactly the one the race's decisions over the trials stored before it plan.

The service is the FAKE fault server (`tests/services/fake_fault_server.py`) with a known
throughput per config (`--token-delay`, a sleep before each streamed token) and a 1 s
load (`--ready-delay`), so a start is a window the test can hit."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from rich.console import Console

from ddtune.services import procs
from ddtune.services.controllers.process import scope_prefix
from ddtune.sweep.plan import parse_spec as load_spec_text
from ddtune.sweep.plan import read_spec
from ddtune.sweep.plan.prepare import prepare
from ddtune.sweep.plan.races.by_start import StartRace
from ddtune.sweep.plan.strategies.restart_bound import RestartBoundRace
from ddtune.sweep.reporting import report_setup
from ddtune.sweep.run.loop import run_sweep
from ddtune.sweep.store.db import Store
from ddtune.sweep.watch.state import restart_bound_eta

SWEEP = """
strategy = "race"
restart_bound = true
repeats = 3
passes_per_start = 3
tolerance = 0.05
seed = 5
"""
# token delays of 4-8 ms: a 50% gap that scheduling noise on a loaded 2-core machine cannot hide
CONFIGS = """
[[configs]]
mode = "ddtree"
budget = 4
vars = { tok = "0.008", delay = "1.0" }
[[configs]]
mode = "ddtree"
budget = 8
vars = { tok = "0.004", delay = "1.0" }
[[configs]]
mode = "ddtree"
budget = 16
vars = { tok = "0.006", delay = "1.0" }
"""
COSTS = "expected_start_s = 2\nexpected_bench_s = 0.3"


def test_sigkill_during_a_start_then_resume_decides_as_uninterrupted(
    tmp_path, fake_spec_writer, port, runners
):
    spec_path = fake_spec_writer(
        tmp_path,
        "rb",
        CONFIGS,
        port,
        COSTS,
        sweep=SWEEP,
        args='"--token-delay", "{tok}"',
        defaults='tok = "0"',
    )
    store_path = tmp_path / "runs" / "store.sqlite"
    child = runners.start(spec_path, store_path)
    killed = _wait_for_a_second_start(store_path, child)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    _kill_leftovers(store_path.parent)
    before = _done_attempts(store_path)
    _assert_watch_eta_counts_starts_and_benches(store_path)

    with open(tmp_path / "out.txt", "w") as out:
        summary = run_sweep(read_spec(spec_path), store_path, Console(file=out, width=200))
    assert not summary.interrupted and summary.failed == 0
    after = _done_attempts(store_path)
    assert {t: after[t] for t in before} == before  # nothing lost, nothing redone
    assert killed in after and _states(store_path, killed) == ["interrupted", "done"]
    race = _assert_every_trial_was_the_planned_one(spec_path, store_path)
    assert race.stop is not None and race.next() is None
    assert "ddtree b8 k4 wnone delay=1.0 tok=0.004" in race.alive  # the fastest stays
    assert "ddtree b4 k4 wnone delay=1.0 tok=0.008" in race.eliminated  # half its speed: out
    _assert_report_counts_starts(store_path, race)


def _assert_watch_eta_counts_starts_and_benches(store_path: Path) -> None:
    store = Store(store_path, read_only=True)
    try:
        sweep = store.sweep_row()
        spec = load_spec_text(sweep["spec_text"])
        eta = restart_bound_eta(store, sweep["id"], prepare(spec, store, sweep["id"]))
    finally:
        store.close()
    assert eta is not None and eta.startswith("restart-bound race, one start planned at a time")
    assert " a start, " in eta and " a bench)" in eta and "at most " in eta, eta


def _assert_every_trial_was_the_planned_one(spec_path: Path, store_path: Path) -> StartRace:
    """Fold the stored trials one by one into a fresh race: `StartRace.add` refuses a trial
    that is not what `next()` asked for at that point (a UserError from the strategy)."""
    spec = read_spec(spec_path)
    store = Store(store_path)
    try:
        mode = prepare(spec, store).mode
        assert mode.restart_bound
        race = RestartBoundRace(spec, mode)
        state = race.state(store, 1)
        assert state.trials_done == len(store.trials(1))  # every trial finished, each planned
        assert race.next_batch(store, 1) == []  # stopped: nothing more to plan
        return state
    finally:
        store.close()


def _assert_report_counts_starts(store_path: Path, race: StartRace) -> None:
    store = Store(store_path, create=False)
    try:
        options, context = report_setup(store, store.sweep_row("rb"))
    finally:
        store.close()
    assert options.passes_per_start == 3  # a start serves up to 3 benches
    assert context.efforts == {k: (e.starts, e.benches) for k, e in race.efforts.items()}
    assert context.verdict is not None and context.verdict.status == "separated"


def _wait_for_a_second_start(store_path: Path, child, timeout: float = 120.0) -> int:
    """The trial id of a start in progress (its attempt running, not READY yet), once at
    least one earlier start has finished its benches."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert child.poll() is None, "the runner ended before it could be killed"
        found = _starting(store_path) if store_path.exists() else None
        if found is not None:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no second start seen within {timeout} s")


def _starting(store_path: Path) -> int | None:
    store = Store(store_path)
    try:
        done = store.db.execute("SELECT COUNT(*) FROM trials WHERE status='done'").fetchone()[0]
        row = store.db.execute(
            "SELECT t.id FROM attempts a JOIN trials t ON t.id = a.trial_id"
            " WHERE a.state='running' AND a.timings_json='{}' AND (t.repeat - 1) % 3 = 0"
        ).fetchone()
    finally:
        store.close()
    return int(row[0]) if row is not None and done >= 2 else None


def _states(store_path: Path, trial_id: int) -> list[str]:
    store = Store(store_path)
    try:
        return [a["state"] for a in store.attempts(trial_id)]
    finally:
        store.close()


def _done_attempts(store_path: Path) -> dict[int, tuple]:
    store = Store(store_path)
    try:
        rows = store.db.execute(
            "SELECT t.id, a.id, a.started_at, a.ended_at, a.timings_json FROM trials t"
            " JOIN results r ON r.trial_id = t.id JOIN attempts a ON a.id = r.attempt_id"
        )
        return {row[0]: (row[1], row[2], row[3], json.loads(row[4])) for row in rows}
    finally:
        store.close()


def _kill_leftovers(workdir: Path) -> None:
    for info in procs.find_instance(tag=scope_prefix(workdir), tag_prefix=True):
        os.kill(info.pid, signal.SIGKILL)
