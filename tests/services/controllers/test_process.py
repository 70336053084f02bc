"""Process controller happy path: READY only for the new instance with the new config."""

from __future__ import annotations

from ddtune.services import PHASES, procs


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


def test_on_phase_hears_each_step_as_it_starts(svc, port, controllers, tmp_path):
    ctl = controllers(svc.make_spec(port, svc.fault_command()))
    heard: list[str] = []
    first = ctl.reconfigure(svc.params, tmp_path / "a1", on_phase=heard.append)
    assert first.ready, first
    assert tuple(heard) == PHASES

    old_alive: dict[str, bool] = {}  # was the first instance still running as each step began?

    def note(phase: str) -> None:
        old_alive[phase] = procs.is_alive(first.identity["pid"], first.identity["create_time"])

    second = ctl.reconfigure(svc.params, tmp_path / "a2", on_phase=note)
    assert second.ready, second
    assert list(old_alive) == list(PHASES)
    assert old_alive == {
        "render": True,
        "snapshot": True,
        "stop": True,
        "quiesce": True,
        "start": False,
        "poll": False,
    }


def test_failures_end_the_phases_and_cleanup_is_silent(svc, port, controllers, tmp_path):
    missing = controllers(svc.make_spec(port, ["/nonexistent/server"]), name="missing")
    heard: list[str] = []
    out = missing.reconfigure(svc.params, tmp_path / "a1", on_phase=heard.append)
    assert out.failure == "render_failed" and heard == ["render"], (out, heard)

    crashing = controllers(svc.make_spec(port, svc.fault_command("--crash-during-load", "3")))
    heard.clear()
    out = crashing.reconfigure(svc.params, tmp_path / "a2", on_phase=heard.append)
    assert out.failure == "crashed(3)" and tuple(heard) == PHASES, (out, heard)


def test_user_vars_render_into_the_launch(svc, port, controllers, tmp_path):
    spec = svc.make_spec(
        port, svc.fault_command(), env={"X_QUEUE": "q-{queue}"}, vars={"queue": "default"}
    )
    ctl = controllers(spec)
    out = ctl.reconfigure(svc.params, tmp_path / "a1", user_vars={"queue": "fast"})
    assert out.ready, out
    assert procs.read_environ(out.identity["pid"])["X_QUEUE"] == "q-fast"
    shadow = ctl.reconfigure(svc.params, tmp_path / "a2", user_vars={"topk": 9})
    assert shadow.failure == "render_failed" and "topk" in shadow.detail, shadow
