"""Hot controller: POST /v1/ddtree/config on a running server, same instance, new generation."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest

from ddtune.services import PHASES


def test_first_call_starts_then_hot_reconfigures_same_instance(svc, port, controllers, tmp_path):
    ctl = controllers(svc.make_spec(port, svc.fault_command("--hot"), control="hot"))
    first = ctl.reconfigure(svc.params, tmp_path / "a1")
    assert first.ready, first
    assert any("started one" in note for note in first.notes)
    second = ctl.reconfigure(
        svc.params.with_updates({"budget": 40, "window": 128}), tmp_path / "a2"
    )
    assert second.ready, second
    assert second.identity["instance_id"] == first.identity["instance_id"]
    assert second.identity["pid"] == first.identity["pid"]
    assert second.identity["config_generation"] == first.identity["config_generation"] + 1
    assert second.identity["config"] == {"mode": "ddtree", "budget": 40, "topk": 4, "window": 128}


@pytest.mark.parametrize(
    "switches, failure",
    [
        (["--hot", "--hot-ignore"], "stale_instance"),
        (["--hot", "--report-config", '{{"topk": 9}}'], "config_mismatch"),
    ],
)
def test_hot_faults(svc, port, controllers, tmp_path, switches, failure):
    ctl = controllers(svc.make_spec(port, svc.fault_command(*switches), control="hot"))
    first = ctl.reconfigure(
        svc.params.with_updates({"topk": 9}) if failure == "config_mismatch" else svc.params,
        tmp_path / "a1",
    )
    assert first.ready, first
    second = ctl.reconfigure(svc.params.with_updates({"budget": 8}), tmp_path / "a2")
    assert second.failure == failure, second
    assert second.log_tail and svc.leftovers(ctl.workdir) == []


def test_server_that_was_already_running_is_left_running(svc, port, controllers, tmp_path):
    argv = [sys.executable, str(svc.fault_server), "--port", str(port), "--hot"]
    external = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ctl = controllers(
            svc.make_spec(port, svc.fault_command("--hot"), control="hot", timeouts={"identity": 5})
        )
        for _ in range(100):  # wait until the external server answers
            try:
                httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        out = ctl.reconfigure(svc.params.with_updates({"budget": 12}), tmp_path / "a")
        assert out.ready, out
        assert out.identity["pid"] == external.pid
        assert ctl.close() and external.poll() is None
    finally:
        external.terminate()
        external.wait()


def test_hot_in_place_phases_are_snapshot_start_poll(svc, port, controllers, tmp_path):
    ctl = controllers(svc.make_spec(port, svc.fault_command("--hot"), control="hot"))
    heard: list[str] = []
    first = ctl.reconfigure(svc.params, tmp_path / "a1", on_phase=heard.append)
    assert first.ready and tuple(heard) == PHASES, (first, heard)  # started: the full protocol
    heard.clear()
    second = ctl.reconfigure(
        svc.params.with_updates({"mode": "dflash"}), tmp_path / "a2", on_phase=heard.append
    )
    assert second.ready, second
    assert heard == ["snapshot", "start", "poll"]
    assert second.timings["stop_to_quiet_s"] == 0.0 and second.timings["apply_s"] >= 0
