"""Profiles: sglang (get_server_info + env topk) and openai (health + completion) end to end."""

from __future__ import annotations

from ddtune.services.profiles import compare_ddtune_config, compare_sglang_config


def test_config_comparison_uses_canonical_forms():
    assert (
        compare_ddtune_config({"mode": "ar", "budget": 16}, {"mode": "ar", "budget": 0, "topk": 1})
        == []
    )
    assert compare_ddtune_config(
        {"mode": "ddtree", "window": None}, {"mode": "ddtree", "window": 64}
    ) == ["window: requested None, server reports 64"]
    assert "not valid" in compare_ddtune_config({"mode": "ddtree"}, {"mode": "beam"})[0]
    ok = {
        "speculative_algorithm": "DDTREE",
        "speculative_ddtree_budget": 16,
        "speculative_dflash_draft_window_size": None,
    }
    assert (
        compare_sglang_config({"mode": "ddtree", "budget": 16, "topk": 4, "window": None}, ok) == []
    )
    assert compare_sglang_config({"mode": "dflash", "window": None}, ok) == [
        "speculative_algorithm: requested 'DFLASH', server reports 'DDTREE'"
    ]


def test_sglang_profile_checks_server_info_and_topk_env(svc, port, controllers, tmp_path):
    good = controllers(
        svc.make_spec(
            port, svc.fault_command(), profile="sglang", env={"SGLANG_DDTREE_MAX_TOPK": "{topk}"}
        ),
        name="good",
    )
    out = good.reconfigure(svc.params, tmp_path / "a1")
    assert out.ready, out
    assert out.identity["server_info"]["SGLANG_DDTREE_MAX_TOPK"] == "4"
    good.close()
    wrong = controllers(
        svc.make_spec(
            port, svc.fault_command(), profile="sglang", env={"SGLANG_DDTREE_MAX_TOPK": "7"}
        ),
        name="wrong",
    )
    out = wrong.reconfigure(svc.params, tmp_path / "a2")
    assert out.failure == "config_mismatch" and "SGLANG_DDTREE_MAX_TOPK" in out.detail, out


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
