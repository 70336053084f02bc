"""Conditions per trial and the warning when compared trials ran under different ones."""

from __future__ import annotations

from ddtune.report.conditions import condition_values, condition_warnings, server_fingerprint


def test_same_conditions_give_no_warning_even_with_new_pids(synth):
    records = synth.make_records(synth.standard_effects(), repeats=2)
    for i, r in enumerate(records):
        r.conditions["server_identity"].update(
            pid=1000 + i, instance_id=f"i{i}", argv=["--budget", str(i)]
        )
    assert condition_warnings(records) == []
    values = condition_values(records)
    assert values["hardware"] == ["hw-0001"] and values["prompts"] == ["prompts-abc"]
    assert len(values["server"]) == 1 and values["temperature"] == ["0"]


def test_different_hardware_is_warned_with_the_configs_involved(synth):
    records = synth.make_records(synth.standard_effects(), repeats=2)
    moved = [r for r in records if r.label == "ddtree b32 k4 wnone"]
    for r in moved:
        r.conditions["hardware_fingerprint"] = "hw-OTHER"
    warnings = condition_warnings(records)
    assert len(warnings) == 1
    assert "different hardware fingerprints" in warnings[0]
    assert "hw-OTHER (ddtree b32 k4 wnone)" in warnings[0]


def test_different_prompts_models_and_temperatures_are_each_warned(synth):
    records = synth.make_records(synth.standard_effects(), repeats=1)
    records[0].conditions["prompt_set_hash"] = "prompts-changed"
    records[1].conditions["server_identity"]["target_sha256"] = "f" * 64
    records[2].temperature = 0.8
    text = " ".join(condition_warnings(records))
    for name in ("prompt-set hash", "server identity", "temperature"):
        assert f"different {name}" in text


def test_failed_trials_do_not_count_and_missing_conditions_are_said(synth):
    records = synth.make_records(synth.standard_effects(), repeats=1)
    records[0].status, records[0].conditions = "failed", {"hardware_fingerprint": "hw-broken"}
    assert condition_warnings(records) == []
    for r in records:
        r.conditions = {}
    warnings = condition_warnings(records)
    assert any("hardware fingerprint not recorded" in w for w in warnings)
    assert any("prompt-set hash not recorded" in w for w in warnings)


def test_server_fingerprint_ignores_per_start_fields():
    a = {"pid": 1, "instance_id": "a", "target_sha256": "t" * 64, "versions": {"ddtune": "0.1"}}
    b = {"pid": 2, "instance_id": "b", "target_sha256": "t" * 64, "versions": {"ddtune": "0.1"}}
    assert server_fingerprint(a) == server_fingerprint(b)
    assert server_fingerprint({**a, "versions": {"ddtune": "0.2"}}) != server_fingerprint(a)
    assert server_fingerprint({"pid": 3}) is None and server_fingerprint(None) is None


def test_a_sandbox_without_namespaces_is_a_condition_and_a_report_warning(synth, tmp_path):
    from ddtune.report import ReportOptions, build_report

    records = synth.make_records(synth.standard_effects(), repeats=2)
    for r in records:
        r.conditions["sandbox"] = "mechanism: Linux namespaces made by unshare(1)"
    assert condition_values(records)["sandbox"] == [
        "mechanism: Linux namespaces made by unshare(1)"
    ]
    clean = build_report(records, tmp_path / "ns", ReportOptions())
    assert not any("not isolated" in w for w in clean.warnings)
    records[0].conditions["sandbox"] = "NO NAMESPACES (unshare(1) from util-linux not found)"
    summary = build_report(records, tmp_path / "none", ReportOptions())
    assert any(
        "coding tests were not isolated: NO NAMESPACES (unshare(1)" in w for w in summary.warnings
    )
    assert "NO NAMESPACES" in (tmp_path / "none" / "report.md").read_text()
