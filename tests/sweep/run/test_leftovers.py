"""Servers that are not this sweep's on its port (real processes, the FAKE fault server):
a killed runner's server from another store is named, left alone or reclaimed when
allowed (`reclaim_leftovers`, `sweep cleanup`); a live sweep's server and a foreign
process are never killed; each fails fast with exit code 4 instead of retrying."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from ddtune.cli import main
from ddtune.services import procs

CONFIG = """
    [[configs]]
    mode = "ddtree"
    budget = 4
    topk = 2
"""
LOADING = 'vars = { delay = "0" }'  # replaced: the other sweep's server keeps loading
RECLAIM = "reclaim_leftovers = true"


def _other_sweep(tmp_path, writer, runners, port):
    """Sweep 'a' (store A) whose server is still loading on `port`: (runner, server pid, store)."""
    spec = writer(tmp_path, "a", CONFIG, port)
    spec.write_text(spec.read_text().replace(LOADING, 'vars = { delay = "600" }'))
    store = tmp_path / "A" / "store.sqlite"
    runner = runners.start(spec, store)
    server = runners.wait_listening(port)
    return runner, server, store


def _run(tmp_path, writer, port, name: str, capsys, service: str = "") -> tuple[int, str, float]:
    spec = writer(tmp_path, name, CONFIG, port, service=service)
    started = time.monotonic()
    code = main(["sweep", "run", str(spec), "--store", str(tmp_path / name / "store.sqlite")])
    return code, " ".join(capsys.readouterr().err.split()), time.monotonic() - started


def _cleanup(capsys, *args: str) -> tuple[int, str]:
    code = main(["sweep", "cleanup", *args])
    return code, " ".join(capsys.readouterr().err.split())


def test_a_killed_runners_server_is_named_left_alone_then_cleaned_up(
    tmp_path, fake_spec_writer, runners, port, capsys
):
    runner, server, store_a = _other_sweep(tmp_path, fake_spec_writer, runners, port)
    started = procs.process_info(server).create_time
    runner.kill()  # SIGKILL: no cleanup, the server outlives its runner
    runner.wait()
    code, err, seconds = _run(tmp_path, fake_spec_writer, port, "b", capsys)
    assert code == 4, err  # was: every trial port_in_use after the quiesce timeout, exit 0
    assert seconds < 30  # the quiesce timeout is 60 s: it did not wait for it
    assert f"ddtune server pid {server} " in err and "left by sweep 'a'" in err
    assert f"store {store_a}" in err and f"runner pid {runner.pid} is gone" in err
    assert time.strftime("%Y-%m-%d", time.localtime(started)) in err  # its start time
    assert f"ddtune sweep cleanup --store {store_a}" in err and RECLAIM in err
    assert procs.is_alive(server, started)  # not allowed to reclaim: left alone
    code, out = _cleanup(capsys, "--dry-run")
    assert code == 0 and f"would stop: ddtune server pid {server} " in out
    assert procs.is_alive(server, started)
    code, out = _cleanup(capsys, "--store", str(store_a))
    assert code == 0 and f"stopped: ddtune server pid {server} " in out, out
    assert not procs.is_alive(server, started) and procs.port_listeners(port) == {}
    assert main(["sweep", "status", "--store", str(tmp_path / "b" / "store.sqlite")]) == 0
    assert "port_in_use" in capsys.readouterr().out  # the blocked attempt is on record


def test_a_killed_runners_server_is_reclaimed_when_allowed(
    tmp_path, fake_spec_writer, runners, port, capsys
):
    runner, server, _ = _other_sweep(tmp_path, fake_spec_writer, runners, port)
    started = procs.process_info(server).create_time
    runner.kill()
    runner.wait()
    code, err, _ = _run(tmp_path, fake_spec_writer, port, "c", capsys, service=RECLAIM)
    assert code == 0, err
    assert f"reclaimed ddtune server pid {server} " in err and "left by sweep 'a'" in err
    assert not procs.is_alive(server, started)


def test_a_running_sweeps_server_is_never_reclaimed(
    tmp_path, fake_spec_writer, runners, port, capsys
):
    runner, server, store_a = _other_sweep(tmp_path, fake_spec_writer, runners, port)
    started = procs.process_info(server).create_time
    code, err, seconds = _run(tmp_path, fake_spec_writer, port, "d", capsys, service=RECLAIM)
    assert code == 4 and seconds < 30, err
    assert f"runner pid {runner.pid} is running" in err and "wait for that sweep" in err
    code, out = _cleanup(capsys, "--dry-run")  # (a real run would touch other tests' servers)
    assert code == 0 and f"left alone: ddtune server pid {server} " in out
    assert main(["sweep", "cleanup", "--store", str(store_a)]) == 2  # its runner holds it
    assert "another ddtune sweep runner" in capsys.readouterr().err
    assert procs.is_alive(server, started)
    runner.send_signal(signal.SIGINT)
    assert runner.wait(timeout=60) == 3
    assert not procs.is_alive(server, started)


def test_a_foreign_process_on_the_port_is_named_and_never_killed(
    tmp_path, fake_spec_writer, port, capsys
):
    listen = (
        "import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1])));"
        " s.listen(); print('listening', flush=True); time.sleep(600)"
    )
    squatter = subprocess.Popen(
        [sys.executable, "-S", "-c", listen, str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert squatter.stdout.readline().strip() == "listening"
        code, err, seconds = _run(tmp_path, fake_spec_writer, port, "e", capsys, service=RECLAIM)
        assert code == 4 and seconds < 30, err
        assert f"port {port} is held by pid {squatter.pid} (python" in err
        assert "-c import socket" in err and "not a ddtune process" in err  # its command line
        assert "ddtune never kills it" in err
        assert squatter.poll() is None  # even with reclaim_leftovers = true
        code, out = _cleanup(capsys, "--dry-run")
        assert code == 0 and f"pid {squatter.pid} " not in out and squatter.poll() is None
    finally:
        squatter.kill()
        squatter.wait()
