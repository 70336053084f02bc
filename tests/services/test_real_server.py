"""End to end against the real `ddtune serve` with a small random checkpoint (slow: loads torch)."""

from __future__ import annotations

import pytest

from ddtune.params import DecodeParams

testing = pytest.importorskip(
    "ddtune.ddtree.testing", reason="ddtune.ddtree.testing is not available"
)
pytestmark = pytest.mark.slow


def serve_command(common, target, drafter) -> list[str]:  # noqa: ANN001
    """`ddtune serve` on the checkpoint with the controller's placeholders."""
    placeholders = {name: f"{{{name}}}" for name in ("mode", "budget", "topk", "window")}
    return common.serve_argv(*common.serve_args(target, drafter, **placeholders), port="{port}")


def test_restart_then_hot_reconfigure_real_server(svc, port, controllers, tmp_path, common):
    target, drafter = testing.write_random_checkpoint(tmp_path / "ckpt", seed=0)
    command = serve_command(common, target, drafter)
    slow = {
        "start": 120,
        "health": 120,
        "identity": 10,
        "generate": 60,
        "request": 30,
        "stop": 10,
        "quiesce": 10,
    }
    ctl = controllers(svc.make_spec(port, command, timeouts=slow), name="process")
    first = ctl.reconfigure(svc.params, tmp_path / "a1")
    assert first.ready, first
    second = ctl.reconfigure(DecodeParams("ddtree", 8, 2, 16), tmp_path / "a2")
    assert second.ready, second
    assert second.identity["instance_id"] != first.identity["instance_id"]
    assert second.identity["config"]["budget"] == 8 and second.identity["config"]["window"] == 16
    # what is served is recorded, so the report can compare conditions across trials
    assert len(second.identity["target_sha256"]) == 64
    assert second.identity["target_sha256"] == first.identity["target_sha256"]
    assert second.identity["versions"]["ddtune"]
    ctl.close()

    hot = controllers(svc.make_spec(port, command, control="hot", timeouts=slow), name="hot")
    started = hot.reconfigure(svc.params, tmp_path / "h1")
    applied = hot.reconfigure(DecodeParams("dflash", 16, 4, 32), tmp_path / "h2")
    assert started.ready and applied.ready, (started, applied)
    assert applied.identity["instance_id"] == started.identity["instance_id"]
    assert applied.identity["config_generation"] > started.identity["config_generation"]
    assert applied.identity["config"]["mode"] == "dflash"
