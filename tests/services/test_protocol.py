"""Fault-injection suite: the readiness protocol against a misbehaving real process.

Each case starts the fake fault server with one switch and checks: no false
READY, the right failure class, the log tail kept, no process left behind.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from ddtune.services import Outcome, build_controller, procs

LONG_DEADLINES = {"timeouts": {"start": 60, "health": 60}}
FAILURES = {
    # case: (switches, spec overrides, failure class, text expected in the log tail)
    "crash": (["--crash-during-load", "3"], LONG_DEADLINES, "crashed(3)", "fake load failure"),
    "oom": (["--oom"], LONG_DEADLINES, "oom", "CUDA out of memory"),
    "slow_bind": (
        ["--bind-delay", "5"],
        {"timeouts": {"start": 2.5}},
        "timeout:start",
        "fake fault server pid",
    ),
    "slow_ready": (
        ["--ready-delay", "6"],
        {"timeouts": {"health": 1}},
        "timeout:health",
        "loading model",
    ),
    "other_config": (
        ["--report-config", '{{"budget": 99}}'],
        {},
        "config_mismatch",
        "ready instance_id",
    ),
    "sigstop_hang": (
        ["--hang-after", "0.5", "--ready-delay", "6"],
        {"timeouts": {"health": 1.5}},
        "timeout:health",
        "loading model",
    ),
    "vllm_models_early": (
        ["--ready-delay", "6", "--models-before-ready"],
        {"engine": "vllm", "timeouts": {"health": 1.5}},
        "timeout:health",
        "loading model",
    ),
}


@dataclass
class FaultRun:
    outcome: Outcome
    seconds: float
    left_after_attempt: list
    listeners_after_attempt: dict
    left_after_close: list


@pytest.fixture(scope="module")
def fault_runs(svc, tmp_path_factory) -> dict[str, FaultRun]:
    """Run every FAILURES case at once: they mostly wait, so threads save minutes."""

    def run(case: str) -> tuple[str, FaultRun]:
        switches, overrides, _, _ = FAILURES[case]
        work = tmp_path_factory.mktemp(case)
        port = svc.free_port()
        ctl = build_controller(
            svc.make_spec(port, svc.fault_command(*switches), **overrides), work / "work"
        )
        t0 = time.monotonic()
        out = ctl.reconfigure(svc.params, work / "attempt")
        seconds = time.monotonic() - t0
        left, listeners = svc.leftovers(ctl.workdir), procs.port_listeners(port)
        ctl.close()
        return case, FaultRun(out, seconds, left, listeners, svc.leftovers(ctl.workdir))

    with ThreadPoolExecutor(len(FAILURES)) as pool:
        return dict(pool.map(run, FAILURES))


@pytest.mark.parametrize("case", list(FAILURES))
def test_fault_is_classified_and_cleaned_up(fault_runs, case):
    _, _, failure, log_text = FAILURES[case]
    run = fault_runs[case]
    out = run.outcome
    assert not out.ready
    assert out.failure == failure, out
    assert log_text in out.log_tail
    assert out.log_path and out.log_path.endswith("service.log")
    assert run.left_after_attempt == [] and out.leftover_pids == []
    assert run.listeners_after_attempt == {} and run.left_after_close == []
    if failure.startswith("crashed") or failure == "oom":
        assert run.seconds < 30, "a dead process must fail fast, not wait for the 60 s deadline"


SCENARIOS = {}


def scenario(fn=None, **kwargs):
    """Register a two-attempt scenario; they run concurrently in `scenario_errors`."""

    def register(fn):
        name = fn.__name__ + "".join(f"[{k}={v}]" for k, v in kwargs.items())
        SCENARIOS[name] = functools.partial(fn, **kwargs)
        return fn

    return register(fn) if fn else register


@pytest.fixture(scope="module")
def scenario_errors(svc, tmp_path_factory) -> dict[str, BaseException | None]:
    """Run every scenario at once, each on its own port and workdir."""
    runs = {
        name: functools.partial(
            lambda fn, controllers, tmp: fn(svc, svc.free_port(), controllers, tmp), fn
        )
        for name, fn in SCENARIOS.items()
    }
    return svc.run_scenarios(runs, tmp_path_factory)


@scenario
def slow_bind_and_slow_ready_wait_for_the_real_ready(svc, port, controllers, tmp_path):
    ctl = controllers(
        svc.make_spec(port, svc.fault_command("--bind-delay", "1", "--ready-delay", "1.5"))
    )
    out = ctl.reconfigure(svc.params, tmp_path / "a")
    assert out.ready, out
    # the 1 s bind delay starts in the child, which runs while `start` (the spawn) is timed
    assert out.timings["start_s"] + out.timings["port_s"] >= 0.99
    assert out.timings["start_to_ready_s"] >= 2.4
    ready_line = re.search(r"ready instance_id=(\w+)", out.log_tail)
    assert ready_line and ready_line.group(1) == out.identity["instance_id"]


@scenario
def models_200_before_ready_is_not_ready_for_vllm(svc, port, controllers, tmp_path):
    cmd = svc.fault_command("--ready-delay", "2", "--models-before-ready")
    ctl = controllers(svc.make_spec(port, cmd, engine="vllm"))
    out = ctl.reconfigure(svc.params, tmp_path / "a")
    assert out.ready, out
    assert out.timings["start_to_ready_s"] >= 1.9
    assert out.identity["models"] == ["fake-model"]


@scenario(linger=1.5, grace=4.0)
@scenario(linger=30.0, grace=1.0)
def old_identity_answering_after_sigterm_is_never_ready(
    svc, port, controllers, tmp_path, linger, grace
):
    cmd = svc.fault_command("--linger-after-term", str(linger))
    ctl = controllers(svc.make_spec(port, cmd, timeouts={"stop": grace}))
    first = ctl.reconfigure(svc.params, tmp_path / "a1")
    assert first.ready, first
    second = ctl.reconfigure(svc.params.with_updates({"topk": 6}), tmp_path / "a2")
    assert second.ready, second
    assert second.identity["instance_id"] != first.identity["instance_id"]
    assert second.identity["config"]["topk"] == 6
    assert second.identity["instance_id"] in second.log_tail
    assert not procs.is_alive(first.identity["pid"], first.identity["create_time"])
    assert second.timings["stop_to_quiet_s"] >= min(linger, grace) - 0.1


@scenario
def process_ignoring_sigterm_is_killed(svc, port, controllers, tmp_path):
    ctl = controllers(svc.make_spec(port, svc.fault_command("--ignore-term"), timeouts={"stop": 1}))
    first = ctl.reconfigure(svc.params, tmp_path / "a1")
    second = ctl.reconfigure(svc.params, tmp_path / "a2")
    assert first.ready and second.ready, (first, second)
    assert second.timings["stop_to_quiet_s"] >= 0.9
    assert second.identity["instance_id"] in second.log_tail
    assert not procs.is_alive(first.identity["pid"], first.identity["create_time"])


@scenario
def children_and_setsid_orphans_holding_the_port_are_found_and_killed(
    svc, port, controllers, tmp_path
):
    ctl = controllers(
        svc.make_spec(port, svc.fault_command("--orphan-holds-port", "--children", "2"))
    )
    first = ctl.reconfigure(svc.params, tmp_path / "a1")
    assert first.ready, first
    orphan = int(re.search(r"orphan pid=(\d+)", first.log_tail).group(1))
    orphan_info = procs.process_info(orphan)
    assert orphan_info is not None and orphan_info.pgid != first.identity["pgid"], (
        "the orphan left the process group"
    )
    second = ctl.reconfigure(svc.params, tmp_path / "a2")
    assert second.ready, second
    assert not procs.is_alive(orphan, orphan_info.create_time)
    assert second.identity["instance_id"] in second.log_tail
    assert len(svc.leftovers(ctl.workdir)) == 4  # the new server, its 2 children and its orphan


@scenario(release="1.5", attributed=True, failure=None)
@scenario(release="never", attributed=True, failure="gpu_memory_not_released")
@scenario(release="never", attributed=False, failure="gpu_memory_not_released")
def gpu_memory_must_return_to_baseline(
    svc, port, controllers, tmp_path, release, attributed, failure
):
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    cmd = svc.fault_command(
        "--gpu-ledger", str(ledger), "--gpu-mib", "4000", "--gpu-release-after", release
    )
    gpu = svc.FakeLedgerGpu(ledger, attribute=attributed)
    ctl = controllers(
        svc.make_spec(port, cmd, timeouts={"gpu": 3 if failure is None else 1.5}), gpu=gpu
    )
    assert ctl.reconfigure(svc.params, tmp_path / "a1").ready
    second = ctl.reconfigure(svc.params, tmp_path / "a2")
    assert second.failure == failure, second
    assert second.ready == (failure is None)
    if failure is None:
        assert second.timings["gpu_release_s"] >= 1.3
    else:
        assert "GPU 0: 4500 MiB used, baseline 500 MiB" in second.detail and second.log_tail
        assert svc.leftovers(ctl.workdir) == []


@scenario
def persisted_instance_id_is_a_stale_instance(svc, port, controllers, tmp_path):
    ctl = controllers(svc.make_spec(port, svc.fault_command("--instance-id", "fixed-id")))
    assert ctl.reconfigure(svc.params, tmp_path / "a1").ready
    second = ctl.reconfigure(svc.params, tmp_path / "a2")
    assert second.failure == "stale_instance", second
    assert "fixed-id" in second.detail and second.log_tail
    assert svc.leftovers(ctl.workdir) == []


@scenario
def foreign_listener_on_the_port_is_port_in_use(svc, port, controllers, tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        ctl = controllers(svc.make_spec(port, svc.fault_command(), timeouts={"quiesce": 1}))
        out = ctl.reconfigure(svc.params, tmp_path / "a")
    assert out.failure == "port_in_use", out
    assert "pid" in out.detail
    assert svc.leftovers(ctl.workdir) == []


@scenario
def outcome_round_trips_through_json(svc, port, controllers, tmp_path):
    ctl = controllers(svc.make_spec(port, svc.fault_command("--crash-during-load", "7")))
    out = ctl.reconfigure(svc.params, tmp_path / "a")
    again = type(out).from_dict(json.loads(json.dumps(out.to_dict())))
    assert again == out and again.failure == "crashed(7)"


def test_unkillable_process_is_reported_not_hidden(svc, port, controllers, tmp_path, monkeypatch):
    ctl = controllers(
        svc.make_spec(port, svc.fault_command(), timeouts={"stop": 0.3, "quiesce": 0.6})
    )
    first = ctl.reconfigure(svc.params, tmp_path / "a1")
    assert first.ready, first
    with (
        monkeypatch.context() as patch
    ):  # FAKE: signals have no effect, like a process stuck in D state
        patch.setattr(procs, "signal_processes", lambda found, sig: None)
        second = ctl.reconfigure(svc.params, tmp_path / "a2")
    assert second.failure == "timeout:quiesce", second
    assert first.identity["pid"] in second.leftover_pids
    assert "could not kill" in second.detail and any("could not stop" in n for n in second.notes)
    assert second.log_tail  # the old instance's log explains what it was doing


@scenario
def stopped_old_instance_is_continued_so_sigterm_works(svc, port, controllers, tmp_path):
    ctl = controllers(svc.make_spec(port, svc.fault_command(), timeouts={"stop": 15}))
    first = ctl.reconfigure(svc.params, tmp_path / "a1")
    assert first.ready, first
    os.kill(first.identity["pid"], signal.SIGSTOP)  # the old server hangs
    second = ctl.reconfigure(svc.params, tmp_path / "a2")
    assert second.ready, second
    assert second.timings["stop_to_quiet_s"] < 10, (
        "SIGCONT after SIGTERM: no wait for the SIGKILL deadline"
    )
    assert "SIGTERM received" in (tmp_path / "a1" / "service.log").read_text()


def test_close_during_reconfigure_cancels_the_start(svc, port, controllers, tmp_path, monkeypatch):
    ctl = controllers(svc.make_spec(port, svc.fault_command()))
    real_snapshot = ctl.snapshot

    def snapshot_then_interrupted():  # as if a signal handler called close() mid-way
        snap = real_snapshot()
        ctl.close()
        return snap

    monkeypatch.setattr(ctl, "snapshot", snapshot_then_interrupted)
    out = ctl.reconfigure(svc.params, tmp_path / "a")
    assert out.failure == "cancelled" and not out.ready
    assert svc.leftovers(ctl.workdir) == []


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(scenario_errors, name):
    """Each concurrent scenario passed (its own assertion error is re-raised here)."""
    error = scenario_errors[name]
    if error is not None:
        raise error
