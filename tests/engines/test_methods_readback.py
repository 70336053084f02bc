"""Readiness reads every method back from the engine's own report: SGLang's /server_info
(tests/engines/fixtures/sglang_server_info_<method>.json: the fields SGLang 0.5.23 resolves
for the flags `ddtune.methods` renders, recorded by tests/integration/
capture_sglang_fixtures.py) and vLLM's `/server_info?config_format=json` (recorded from a
live vLLM 0.32 n-gram server); acceptance per draft position from vLLM's own counters."""

from __future__ import annotations

import pytest

from ddtune.bench.acceptance import parse_prometheus
from ddtune.engines import get_engine
from ddtune.engines.vllm import RUNNING, note_counts, running_speculative_config
from ddtune.params import DecodeParams

DRAFT = "/repo/src/ddtune/assets/models/drafter"
SGLANG, VLLM = get_engine("sglang"), get_engine("vllm")
# the configs capture_sglang_fixtures.METHOD_FIXTURES renders (drafter path as recorded)
RECORDED = {
    "eagle": {"num_steps": 3, "topk": 4, "num_draft_tokens": 8, "drafter": DRAFT},
    "eagle3": {"num_steps": 3, "topk": 1, "drafter": DRAFT},
    "mtp": {"num_steps": 2, "topk": 1},
    "ngram": {"num_draft_tokens": 8, "max_bfs_breadth": 4},
    "dflash": {"block_size": 8, "drafter": DRAFT},
}


def params(method: str, **knobs: object) -> DecodeParams:
    return DecodeParams.from_wire({"method": method, "method_knobs": knobs})


@pytest.mark.parametrize("method", sorted(RECORDED))
def test_each_sglang_method_passes_readiness_on_its_own_report(fixture, method):
    info = fixture(f"sglang_server_info_{method}.json")
    assert SGLANG.config_mismatches(params(method, **RECORDED[method]), info) == []
    assert SGLANG.config_mismatches(DecodeParams("ar"), info) == [
        f"speculative_algorithm: requested None, server reports {info['speculative_algorithm']!r}"
    ]  # an AR request never passes on a speculative server


@pytest.mark.parametrize("method", ["eagle", "eagle3", "mtp", "ngram"])
def test_an_ar_server_does_not_pass_for_a_speculative_method(fixture, method):
    lines = SGLANG.config_mismatches(
        params(method, **RECORDED[method]), fixture("sglang_server_info_ar.json")
    )
    assert lines[0].startswith("speculative_algorithm: requested '")


def test_sglang_readiness_sees_a_different_knob(fixture):
    info = fixture("sglang_server_info_eagle3.json")
    lines = SGLANG.config_mismatches(params("eagle3", num_steps=5, topk=1, drafter=DRAFT), info)
    assert lines == [
        "speculative_num_draft_tokens: requested 6, server reports 4",
        "speculative_num_steps: requested 5, server reports 3",
    ]


def test_sglang_ddtree_named_as_a_method_reads_back_as_before(fixture):
    info = fixture("sglang_server_info_ddtree_b8_w64.json")
    named = DecodeParams.from_wire(
        {"method": "ddtree", "budget": 8, "window": 64, "method_knobs": {"drafter": DRAFT}}
    )
    assert SGLANG.config_mismatches(named, info) == []


def vllm_info(fixture) -> dict:
    running = running_speculative_config(fixture("vllm_server_info_ngram_k3.json"))
    return {**fixture("vllm_v1_models.json"), RUNNING: {"config": running}}


def test_vllm_reads_the_running_speculative_config_back(fixture):
    ngram = params("ngram", num_draft_tokens=3, prompt_lookup_max=3)
    assert VLLM.config_mismatches(ngram, vllm_info(fixture)) == []
    other = params("ngram", num_draft_tokens=4, prompt_lookup_min=2, prompt_lookup_max=3)
    assert VLLM.config_mismatches(other, vllm_info(fixture)) == [
        "num_speculative_tokens: requested 4, server runs 3",
        "prompt_lookup_min: requested 2, server runs 3",
    ]
    dflash = params("dflash", block_size=4, drafter="/d")
    assert VLLM.config_mismatches(dflash, vllm_info(fixture)) == [
        "method: requested 'dflash', server runs 'ngram'",
        "model: requested '/d', server runs 'ngram'",
    ]


def test_vllm_without_dev_mode_cannot_be_read_back(fixture):
    info = {**fixture("vllm_v1_models.json"), RUNNING: None}
    lines = VLLM.config_mismatches(params("ngram", num_draft_tokens=3), info)
    assert lines == [
        "vLLM /server_info is off: set VLLM_SERVER_DEV_MODE=1 to read back the speculative "
        "config it runs"
    ]


def test_vllm_acceptance_per_draft_position_from_its_counters(fixture):
    before = parse_prometheus(fixture("vllm_metrics_before.txt"))
    after = parse_prometheus(fixture("vllm_metrics_after.txt"))
    value, note = VLLM.counter_acceptance(before, after)
    assert value == pytest.approx(1 + 22 / 8)
    assert note.endswith("accepted per draft position 1.00 0.88 0.88 (8 7 7 of 8 drafts)")
    assert note_counts(note) == (8, (8, 7, 7))
    assert note_counts("vLLM counters: 3 accepted tokens over 2 drafts") is None


def running_info(fixture, name: str) -> dict:
    running = running_speculative_config(fixture(name))
    return {**fixture("vllm_v1_models.json"), RUNNING: {"config": running}}


def test_vllm_mtp_reads_back_on_its_recorded_report(fixture):
    """Recorded from vLLM 0.32's CPU build serving a tiny MiMo model with one MTP layer
    (tests/integration/test_vllm_mtp_live.py): vLLM names the target itself as the draft."""
    info = running_info(fixture, "vllm_server_info_mtp_k1.json")
    assert info[RUNNING]["config"]["model"] == "runs/mimo"
    assert VLLM.config_mismatches(params("mtp", num_steps=1), info) == []
    assert VLLM.config_mismatches(params("mtp", num_steps=2), info) == [
        "num_speculative_tokens: requested 2, server runs 1"
    ]


def test_vllm_eagle3_reads_back_method_steps_and_head(fixture):
    """Recorded from vLLM 0.32's CPU build serving the bundled target with the bundled EAGLE-3
    head at 5 draft tokens (benchmarks/eagle3_vllm.py --served): the head's path as written."""
    info = running_info(fixture, "vllm_server_info_eagle3_k5.json")
    head = "src/ddtune/assets/models/eagle3"
    assert VLLM.config_mismatches(params("eagle3", num_steps=5, drafter=head), info) == []
    assert VLLM.config_mismatches(params("eagle3", num_steps=3, drafter=head), info) == [
        "num_speculative_tokens: requested 3, server runs 5"
    ]
    other = params("eagle3", num_steps=5, drafter="/models/another-head")
    assert VLLM.config_mismatches(other, info) == [
        "model: requested '/models/another-head', server runs 'src/ddtune/assets/models/eagle3'"
    ]
    assert VLLM.config_mismatches(params("eagle", num_steps=5, drafter=head), info) == [
        "method: requested 'eagle', server runs 'eagle3'"
    ]
