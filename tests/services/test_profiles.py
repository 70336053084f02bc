"""Server kinds in the readiness protocol, end to end: sglang (/get_server_info, the drafter
on the launch command, top-k from the process environment) and openai (health + completion)."""

from __future__ import annotations

DRAFTER = ["--speculative-draft-model-path", "/models/drafter"]


def test_sglang_kind_checks_server_info_and_topk_env(svc, port, controllers, tmp_path):
    good = controllers(
        svc.make_spec(
            port,
            svc.fault_command(*DRAFTER),
            profile="sglang",
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
            port, svc.fault_command(), profile="sglang", env={"SGLANG_DDTREE_MAX_TOPK": "7"}
        ),
        name="wrong",
    )
    out = wrong.reconfigure(svc.params, tmp_path / "a2")
    assert out.failure == "config_mismatch" and "SGLANG_DDTREE_MAX_TOPK" in out.detail, out


def test_sglang_kind_checks_the_drafter_of_the_launch_command(svc, port, controllers, tmp_path):
    command = svc.fault_command(*DRAFTER, "--report-drafter", "/models/stale-drafter")
    spec = svc.make_spec(port, command, profile="sglang", env={"SGLANG_DDTREE_MAX_TOPK": "{topk}"})
    out = controllers(spec).reconfigure(svc.params, tmp_path / "a")
    assert out.failure == "config_mismatch", out
    assert out.detail == (
        "speculative_draft_model_path: requested '/models/drafter', "
        "server reports '/models/stale-drafter'"
    )


def test_openai_profile_waits_for_health_and_generation(svc, port, controllers, tmp_path):
    spec = svc.make_spec(
        port,
        svc.fault_command("--ready-delay", "1"),
        profile="openai",
        model="fake-model",
        gpu="auto",
    )
    out = controllers(spec).reconfigure(svc.params, tmp_path / "a")
    assert out.ready, out
    assert out.timings["start_to_ready_s"] >= 0.9
    assert "pid" in out.identity and "instance_id" not in out.identity
    assert any(note.startswith("GPU check skipped") for note in out.notes)
