"""leftovers.py against real processes: who owns an instance (its environment), how a port
holder is classified, what the protocol does with each kind of holder."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from ddtune.services import Owner, build_controller, procs
from ddtune.services.leftovers import (
    OWNER_VAR,
    STORE_VAR,
    SWEEP_VAR,
    WORKDIR_VAR,
    PortWatch,
    holder,
)
from ddtune.services.outcome import PhaseFailure

SLEEPER = [sys.executable, "-S", "-c", "import time; time.sleep(600)"]


@pytest.fixture
def spawn():
    """Start sleepers with extra environment variables; all are killed at teardown."""
    started: list[subprocess.Popen] = []

    def start(env: dict[str, str] | None = None, argv: list[str] = SLEEPER) -> subprocess.Popen:
        started.append(subprocess.Popen(argv, env={**os.environ, **(env or {})}))
        return started[-1]

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def _tagged(owner: Owner | None, tag: str = "ddtune-test-1") -> dict[str, str]:
    return {procs.TAG_VAR: tag, WORKDIR_VAR: "/w", **(owner.env() if owner else {})}


def _wait_env(pid: int, var: str) -> None:
    """The child has exec'd (its environment is the new one)."""
    deadline = time.monotonic() + 10
    while var not in procs.read_environ(pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def test_owner_round_trips_through_the_environment():
    owner = Owner.current(sweep="demo", store="/runs/demo/store.sqlite")
    assert owner.pid == os.getpid() and owner.alive()
    assert Owner.from_env(owner.env()) == owner
    assert Owner.from_env({}) is None and Owner.from_env({OWNER_VAR: "12 x"}) is None
    assert Owner.from_env(Owner(1, 2.5).env()) == Owner(1, 2.5)  # no sweep, no store
    assert not Owner(os.getpid(), 1.0).alive()  # same pid, other start time: a reused pid
    assert owner.name() == "sweep 'demo' (store /runs/demo/store.sqlite)"


def test_holders_are_classified_by_tag_and_owner(spawn):
    gone = Owner(os.getpid(), 1.0, "old", "/old/store.sqlite")  # its runner is not running
    cases = {
        "foreign": spawn(),
        "leftover": spawn(_tagged(gone)),
        "running": spawn(_tagged(Owner.current(sweep="live", store="/live/store.sqlite"))),
        "unknown": spawn(_tagged(None)),
    }
    for proc in cases.values():
        _wait_env(proc.pid, "PATH")
    for kind, proc in cases.items():
        if kind != "foreign":
            _wait_env(proc.pid, procs.TAG_VAR)
        found = holder(proc.pid, ours=set())
        assert found.kind == kind, (kind, found)
        assert found.pid == proc.pid and "time.sleep(600)" in found.cmdline
        assert found.started == procs.process_info(proc.pid).create_time
        assert f"pid {proc.pid} (python" in found.describe()
    assert holder(cases["foreign"].pid, ours={cases["foreign"].pid}).kind == "ours"
    left = holder(cases["leftover"].pid, set())
    assert "left by sweep 'old' (store /old/store.sqlite)" in left.describe()
    assert "--store /old/store.sqlite" in left.advice()
    assert "is running" in holder(cases["running"].pid, set()).describe()
    assert "owner unknown" in holder(cases["unknown"].pid, set()).describe()
    assert "not a ddtune process" in holder(cases["foreign"].pid, set()).describe()
    assert holder(None, set()).kind == "foreign"  # another user's socket: pid not visible


def test_controller_puts_its_owner_into_the_instance_environment(svc, port, tmp_path):
    owner = Owner.current(sweep="s1", store=str(tmp_path / "store.sqlite"))
    ctl = build_controller(svc.make_spec(port, svc.fault_command()), tmp_path / "w", owner=owner)
    try:
        out = ctl.reconfigure(svc.params, tmp_path / "a")
        assert out.ready, out
        env = procs.read_environ(out.identity["pid"])
        assert env[SWEEP_VAR] == "s1" and env[STORE_VAR] == str(tmp_path / "store.sqlite")
        assert env[WORKDIR_VAR] == str(tmp_path / "w") and Owner.from_env(env) == owner
    finally:
        ctl.close()


def _squat(port: int) -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def test_a_foreign_listener_fails_fast_and_is_named(svc, port, controllers, tmp_path):
    spec = svc.make_spec(port, svc.fault_command(), timeouts={"quiesce": 60})
    with _squat(port):  # this test process: not tagged, never killed
        started = time.monotonic()
        out = controllers(spec).reconfigure(svc.params, tmp_path / "a")
        assert time.monotonic() - started < 20  # not the 60 s quiesce timeout
    assert out.failure == "port_in_use", out
    assert [h["pid"] for h in out.port_holders] == [os.getpid()]
    assert out.port_holders[0]["kind"] == "foreign"
    assert f"pid {os.getpid()} (" in out.detail and "not a ddtune process" in out.detail


def test_hooks_wait_out_an_untagged_listener(svc, port, controllers, tmp_path):
    """A hooks server may be anyone's process (docker-proxy): no fail fast, no holders."""
    hooks = {"start": "true", "stop": "true"}
    spec = svc.make_spec(port, [], control="hooks", hooks=hooks, timeouts={"quiesce": 2.5})
    with _squat(port):
        started = time.monotonic()
        out = controllers(spec).reconfigure(svc.params, tmp_path / "a")
        assert time.monotonic() - started >= 2.5
    assert out.failure == "port_in_use" and out.port_holders == [], out
    assert f"pid {os.getpid()} (" in out.detail


def test_port_watch_reclaims_a_leftover_only_when_allowed(svc, port, spawn):
    gone = Owner(os.getpid(), 1.0, "old", "/old/store.sqlite")
    argv = [sys.executable, "-S", str(svc.fault_server), "--port", str(port)]
    server = spawn(_tagged(gone, "ddtune-test-reclaim"), argv)
    while not procs.port_listeners(port):
        time.sleep(0.05)
    kept = PortWatch(port, set, reclaim=False)
    assert [h.kind for h in kept.check()] == ["leftover"]
    time.sleep(2.1)  # FAIL_FAST_S with only a holder it may not stop
    with pytest.raises(PhaseFailure) as failed:
        kept.check()
    assert failed.value.failure == "port_in_use" and failed.value.holders[0]["pid"] == server.pid
    assert server.poll() is None
    watch = PortWatch(port, set, reclaim=True, grace=2, kill_wait=2)
    assert watch.check() == [] and procs.port_listeners(port) == {}
    assert server.wait(timeout=10) is not None
    assert len(watch.reclaimed) == 1 and f"pid {server.pid} " in watch.reclaimed[0]


def test_hot_never_reconfigures_another_sweeps_server(svc, port, controllers, spawn, tmp_path):
    """Hot uses a server started by hand, but a leftover of another sweep only after reclaiming."""
    gone = Owner(os.getpid(), 1.0, "old", "/old/store.sqlite")
    argv = [sys.executable, "-S", str(svc.fault_server), "--port", str(port), "--hot"]
    server = spawn(_tagged(gone, "ddtune-test-hot"), argv)
    while not procs.port_listeners(port):
        time.sleep(0.05)
    spec = svc.make_spec(port, svc.fault_command("--hot"), control="hot")
    out = controllers(spec).reconfigure(svc.params, tmp_path / "a")
    assert out.failure == "port_in_use" and out.port_holders[0]["pid"] == server.pid, out
    assert "left by sweep 'old'" in out.detail and server.poll() is None
    spec = svc.make_spec(port, svc.fault_command("--hot"), control="hot", reclaim_leftovers=True)
    out = controllers(spec, name="w2").reconfigure(svc.params, tmp_path / "b")
    assert out.ready, out
    assert server.wait(timeout=10) is not None and f"pid {server.pid} " in out.reclaimed[0]
    assert out.identity["pid"] != server.pid
