"""Restore: a sweep interrupted by a real signal puts a FAKE systemd unit (tests/services/
fake_systemd.py, serving the FAKE fault server) back on its own configuration, READY, with
the sweep's drop-in gone; a hot server that ran before the sweep gets its config back."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ddtune.cli import main

FAULT_SERVER = Path(__file__).parents[2] / "services" / "fake_fault_server.py"
UNIT = "prod-llm.service"
LOADING = """
    [[configs]]          # keeps loading for 600 s: the sweep is interrupted meanwhile
    mode = "ddtree"
    budget = 4
    topk = 2
    vars = { delay = "600" }
"""


def _unit(port: int) -> dict[str, str]:
    out = subprocess.run(
        ["systemctl", "show", UNIT, "--property=InvocationID,ActiveState"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines())


def _config(port: int) -> dict:
    return httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=5).json()["config"]


def _wait(check, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("timed out")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_sweep_leaves_the_unit_on_its_own_config_and_ready(
    signum, tmp_path, fake_systemd, fake_spec_writer, runners, port
):
    root, install_unit = fake_systemd
    install_unit(UNIT, f"{sys.executable} -S {FAULT_SERVER} --port {port} --mode ar")
    subprocess.run(["systemctl", "start", UNIT], check=True)
    try:
        _wait(lambda: _config(port)["mode"] == "ar")
        before = _unit(port)["InvocationID"]
        service = f'control = "systemd"\nunit = "{UNIT}"\nsystemd_dir = "{root / "run"}"\n'
        spec = fake_spec_writer(tmp_path, "prod", LOADING, port, service)
        store = tmp_path / "s" / "store.sqlite"
        runner = runners.start(spec, store)
        _wait(lambda: _unit(port)["InvocationID"] not in ("", before))  # a trial started
        runner.send_signal(signum)
        assert runner.wait(timeout=120) == 3
        log = (store.parent / "runner.log").read_text()
        assert "restored:" in " ".join(log.split()), log
        assert _unit(port)["ActiveState"] == "active"
        assert _config(port)["mode"] == "ar"  # the unit's own ExecStart, not the trial's
        assert not list((root / "run").rglob("*.conf"))  # the sweep's drop-in is gone
    finally:
        subprocess.run(["systemctl", "stop", UNIT], check=True)


def test_a_hot_server_that_ran_before_the_sweep_gets_its_config_back(
    tmp_path, fake_spec_writer, port, capsys
):
    server = subprocess.Popen(
        [sys.executable, "-S", str(FAULT_SERVER), "--port", str(port), "--hot"]
        + ["--mode", "ddtree", "--budget", "32", "--topk", "8"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(lambda: _config(port)["budget"] == 32)
        configs = LOADING.replace('    vars = { delay = "600" }\n', "")
        spec = fake_spec_writer(tmp_path, "hot", configs, port, 'control = "hot"')
        assert main(["sweep", "run", str(spec), "--store", str(tmp_path / "s.sqlite")]) == 0
        err = " ".join(capsys.readouterr().err.split())
        assert "restored: the running server is back on ddtree b32 k8" in err, err
        assert (_config(port)["budget"], _config(port)["topk"]) == (32, 8)
        assert server.poll() is None  # the same server, never stopped
    finally:
        server.kill()
        server.wait()


def test_run_apply_applies_the_answer_instead_of_restoring(
    tmp_path, fake_systemd, fake_spec_writer, port, capsys
):
    root, install_unit = fake_systemd
    install_unit(UNIT, f"{sys.executable} -S {FAULT_SERVER} --port {port} --mode ar")
    subprocess.run(["systemctl", "start", UNIT], check=True)
    try:
        _wait(lambda: _config(port)["mode"] == "ar")
        service = f'control = "systemd"\nunit = "{UNIT}"\nsystemd_dir = "{root / "run"}"\n'
        configs = LOADING.replace('    vars = { delay = "600" }\n', "")
        spec = fake_spec_writer(tmp_path, "once", configs, port, service)
        code = main(["sweep", "run", "--apply", str(spec), "--store", str(tmp_path / "s.sqlite")])
        err = " ".join(capsys.readouterr().err.split())
        assert code == 0, err
        assert "applied ddtree b4 k2 wnone to prod-llm.service: READY" in err, err
        assert "restored:" not in err  # ended: applied, not put back
        assert _config(port)["budget"] == 4 and _unit(port)["ActiveState"] == "active"
    finally:
        subprocess.run(["systemctl", "stop", UNIT], check=True)
