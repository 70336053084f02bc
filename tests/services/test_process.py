"""Process controller happy path: READY only for the new instance with the new config."""

from __future__ import annotations


def test_reconfigure_twice_gives_new_identity(svc, port, controllers, tmp_path):
    ctl = controllers(svc.make_spec(port, svc.fault_command()))
    first = ctl.reconfigure(svc.params, tmp_path / "a1")
    assert first.ready, first
    second = ctl.reconfigure(svc.params.with_updates({"budget": 32}), tmp_path / "a2")
    assert second.ready, second
    assert second.identity["instance_id"] != first.identity["instance_id"]
    assert second.previous_identity["instance_id"] == first.identity["instance_id"]
    assert second.identity["config"]["budget"] == 32
    assert "ready instance_id=" in second.log_tail
    assert second.timings["stop_to_quiet_s"] >= 0 and second.timings["start_to_ready_s"] > 0
