"""Server kinds in the readiness protocol, end to end: sglang (/server_info of 0.5.23, or
/get_server_info of an older release; the drafter on the launch command; top-k and the DDTree
knobs from the process environment) and openai (health + completion)."""

from __future__ import annotations

import pytest

from ddtune.params import DecodeParams

DRAFTER = ["--speculative-draft-model-path", "/models/drafter", "--sglang", "0.5.23"]


def test_sglang_kind_checks_server_info_and_topk_env(svc, port, controllers, tmp_path):
    good = controllers(
        svc.make_spec(
            port,
            svc.fault_command(*DRAFTER),
            engine="sglang",
            env={"SGLANG_DDTREE_MAX_TOPK": "{topk}"},
        ),
        name="good",
    )
    out = good.reconfigure(svc.params, tmp_path / "a1")
    assert out.ready, out
    assert out.identity["server_info"]["SGLANG_DDTREE_MAX_TOPK"] == "4"
    assert out.identity["server_info"]["speculative_draft_model_path"] == "/models/drafter"
    good.close()
    wrong = controllers(
        svc.make_spec(
            port,
            svc.fault_command("--sglang", "0.5.23"),
            engine="sglang",
            env={"SGLANG_DDTREE_MAX_TOPK": "7"},
        ),
        name="wrong",
    )
    out = wrong.reconfigure(svc.params, tmp_path / "a2")
    assert out.failure == "config_mismatch" and "SGLANG_DDTREE_MAX_TOPK" in out.detail, out


def test_sglang_kind_checks_the_drafter_of_the_launch_command(svc, port, controllers, tmp_path):
    command = svc.fault_command(*DRAFTER, "--report-drafter", "/models/stale-drafter")
    spec = svc.make_spec(port, command, engine="sglang", env={"SGLANG_DDTREE_MAX_TOPK": "{topk}"})
    out = controllers(spec).reconfigure(svc.params, tmp_path / "a")
    assert out.failure == "config_mismatch", out
    assert out.detail == (
        "speculative_draft_model_path: requested '/models/drafter', "
        "server reports '/models/stale-drafter'"
    )


@pytest.mark.parametrize("flavour", ["0.5.23", "legacy"])
def test_sglang_window_is_read_under_either_name_and_endpoint(
    svc, port, controllers, tmp_path, flavour
):
    """0.5.23 answers /server_info with speculative_draft_window_size; an older SGLang has
    only /get_server_info with speculative_dflash_draft_window_size: both verify."""
    command = svc.fault_command("--speculative-draft-model-path", "/d", "--sglang", flavour)
    spec = svc.make_spec(port, command, engine="sglang", env={"SGLANG_DDTREE_MAX_TOPK": "{topk}"})
    params = DecodeParams("ddtree", 8, 4, 64)
    out = controllers(spec).reconfigure(params, tmp_path / "a")
    assert out.ready, out
    assert out.identity["server_info"]["speculative_draft_window_size"] == 64
    assert out.identity["version"] == ("0.5.23" if flavour == "0.5.23" else None)


def test_sglang_knobs_are_witnessed_in_the_process_environment(svc, port, controllers, tmp_path):
    env = {
        "SGLANG_DDTREE_MAX_TOPK": "{topk}",
        "SGLANG_DDTREE_DEPTH_BONUS": "{depth_bonus}",
        "SGLANG_DDTREE_RANK_PROBE": "{rank_probe}",
    }
    command = svc.fault_command(*DRAFTER)
    spec = svc.make_spec(port, command, engine="sglang", env=env)
    controller = controllers(spec)
    bonus = DecodeParams("ddtree", 8, 4, None, depth_bonus=0.5, rank_probe=True)
    out = controller.reconfigure(bonus, tmp_path / "a1")
    assert out.ready, out
    reported = out.identity["server_info"]
    assert (reported["SGLANG_DDTREE_DEPTH_BONUS"], reported["SGLANG_DDTREE_RANK_PROBE"]) == (
        "0.5",
        "true",
    )
    # a knob left at SGLang's default must be absent: here the placeholder set "default"
    out = controller.reconfigure(
        DecodeParams("ddtree", 8, 4, None, rank_probe=True), tmp_path / "a2"
    )
    assert out.failure == "config_mismatch", out
    assert "SGLANG_DDTREE_DEPTH_BONUS: requested None, server reports 'default'" in out.detail


def test_openai_profile_waits_for_health_and_generation(svc, port, controllers, tmp_path):
    spec = svc.make_spec(
        port,
        svc.fault_command("--ready-delay", "1"),
        engine="openai",
        model="fake-model",
        gpu="auto",
    )
    out = controllers(spec).reconfigure(svc.params, tmp_path / "a")
    assert out.ready, out
    assert out.timings["start_to_ready_s"] >= 0.9
    assert "pid" in out.identity and "instance_id" not in out.identity
    assert any(note.startswith("GPU check skipped") for note in out.notes)
