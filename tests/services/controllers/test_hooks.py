"""Hooks controller: user stop/start/logs shell commands driving a real (fake fault) server."""

from __future__ import annotations

import sys


def hooks_spec(svc, port, state_dir, *switches, stop=None, start_extra="", **overrides):
    server = " ".join(f"'{s}'" for s in switches)
    start = (
        '"$PY" "$SERVER" --port "$DDTUNE_PORT" --mode "$DDTUNE_MODE" --budget "$DDTUNE_BUDGET" '
        f'--topk "$DDTUNE_TOPK" --window "$DDTUNE_WINDOW" {server} > "$STATE/server.log" 2>&1 & '
        f'echo $! > "$STATE/pid"{start_extra}'
    )
    hooks = {
        "start": start,
        "stop": stop
        or 'if [ -f "$STATE/pid" ]; then kill "$(cat "$STATE/pid")" 2>/dev/null; fi; true',
        "logs": 'cat "$STATE/server.log"',
    }
    env = {"PY": sys.executable, "SERVER": str(svc.fault_server), "STATE": str(state_dir)}
    return svc.make_spec(port, [], control="hooks", hooks=hooks, env=env, **overrides)


def test_hooks_reconfigure_passes_config_as_environment(svc, port, controllers, tmp_path):
    ctl = controllers(hooks_spec(svc, port, tmp_path))
    first = ctl.reconfigure(svc.params, tmp_path / "a1")
    second = ctl.reconfigure(
        svc.params.with_updates({"mode": "dflash", "window": 32}), tmp_path / "a2"
    )
    assert first.ready and second.ready, (first, second)
    assert (
        second.identity["config"]["mode"] == "dflash" and second.identity["config"]["window"] == 32
    )
    assert second.identity["instance_id"] != first.identity["instance_id"]
    assert "--- start hook" in second.log_tail and "ready instance_id=" in second.log_tail


def test_failing_start_hook_is_start_failed(svc, port, controllers, tmp_path):
    ctl = controllers(hooks_spec(svc, port, tmp_path, start_extra="; exit 4"))
    out = ctl.reconfigure(svc.params, tmp_path / "a")
    assert out.failure == "start_failed(4)", out
    assert "start hook exited with 4" in out.log_tail
    assert svc.leftovers(ctl.workdir) == []


def test_stop_hook_that_does_not_stop_is_backed_by_the_tag(svc, port, controllers, tmp_path):
    ctl = controllers(hooks_spec(svc, port, tmp_path, stop="true"))
    first = ctl.reconfigure(svc.params, tmp_path / "a1")
    second = ctl.reconfigure(svc.params, tmp_path / "a2")
    assert first.ready and second.ready, (first, second)
    assert first.identity["local_pids"][0] not in {p.pid for p in svc.leftovers(ctl.workdir)}


def test_local_server_crash_fails_fast_with_log(svc, port, controllers, tmp_path):
    ctl = controllers(
        hooks_spec(svc, port, tmp_path, "--crash-during-load", "5", "--crash-after", "0.5")
    )
    out = ctl.reconfigure(svc.params, tmp_path / "a")
    assert out.failure == "crashed(unknown)", out
    assert "fake load failure" in out.log_tail
    assert out.timings["total_s"] < 5
