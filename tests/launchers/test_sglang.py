"""SGLang argv builder: flags per mode, identity against `/get_server_info` fixtures, meta_info acceptance."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from ddtune.bench.acceptance import request_acceptance
from ddtune.bench.client import StreamRecord
from ddtune.errors import UserError
from ddtune.launchers.sglang import TOPK_ENV, expected_server_args, sglang_argv
from ddtune.params import DecodeParams
from ddtune.services.profiles import compare_sglang_config

FIXTURES = Path(__file__).parent / "fixtures"
MODEL, DRAFT = "/models/Kimi-K2-Instruct", "/models/Kimi-K2-DFlash"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def parse_like_sglang(argv: list[str]) -> dict:
    """Parse the flags the way SGLang's argparse does (dashes → ServerArgs field names)."""
    parser = argparse.ArgumentParser()
    for flag in (
        "--model-path",
        "--host",
        "--speculative-algorithm",
        "--speculative-draft-model-path",
    ):
        parser.add_argument(flag)
    for flag in (
        "--port",
        "--tp-size",
        "--speculative-ddtree-budget",
        "--speculative-dflash-draft-window-size",
    ):
        parser.add_argument(flag, type=int)
    parser.add_argument("--mem-fraction-static", type=float)
    assert argv[1:3] == ["-m", "sglang.launch_server"]
    return vars(parser.parse_args(argv[3:]))


def reported(info: dict, env: dict[str, str]) -> dict:
    """What the services sglang profile reads: /get_server_info fields + the process's topk env."""
    keys = (
        "speculative_algorithm",
        "speculative_ddtree_budget",
        "speculative_dflash_draft_window_size",
    )
    return {**{k: info.get(k) for k in keys}, TOPK_ENV: env.get(TOPK_ENV)}


def test_ddtree_argv_carries_every_setting():
    params = DecodeParams("ddtree", budget=8, topk=6, window=2048)
    argv, env = sglang_argv(MODEL, DRAFT, params, 30000, ["--mem-fraction-static", "0.8"], tp=8)
    parsed = parse_like_sglang(argv)
    assert parsed["speculative_algorithm"] == "DDTREE"
    assert parsed["speculative_draft_model_path"] == DRAFT
    assert parsed["speculative_ddtree_budget"] == 8
    assert parsed["speculative_dflash_draft_window_size"] == 2048
    assert (parsed["tp_size"], parsed["port"], parsed["mem_fraction_static"]) == (8, 30000, 0.8)
    assert env == {TOPK_ENV: "6"}


def test_window_none_and_dflash_leave_flags_out():
    argv, env = sglang_argv(MODEL, DRAFT, {"mode": "dflash", "window": "none"}, 30000)
    parsed = parse_like_sglang(argv)
    assert parsed["speculative_algorithm"] == "DFLASH"
    assert parsed["speculative_ddtree_budget"] is None
    assert parsed["speculative_dflash_draft_window_size"] is None
    assert env == {}  # top-k is a DDTree knob only


def test_ar_has_no_speculative_flags():
    argv, env = sglang_argv(MODEL, None, DecodeParams("ar"), 30001)
    assert not [a for a in argv if a.startswith("--speculative")]
    assert env == {}
    assert parse_like_sglang(argv)["port"] == 30001


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"draft_path": None}, "needs a drafter"),
        ({"extra": ["--speculative-ddtree-budget", "4"]}, "set by ddtune"),
        ({"extra": ["--port=1"]}, "set by ddtune"),
        ({"extra": "--tp 8"}, "list of strings"),
        ({"tp": 0}, "positive number of GPUs"),
    ],
)
def test_bad_input_is_a_clear_user_error(kwargs, message):
    call = {"draft_path": DRAFT, "extra": (), "tp": 1, **kwargs}
    with pytest.raises(UserError, match=message):
        sglang_argv(MODEL, call["draft_path"], DecodeParams(), 30000, call["extra"], tp=call["tp"])


def test_expected_server_args_match_what_the_flags_set():
    params = DecodeParams("ddtree", budget=8, topk=4, window=2048)
    argv, _ = sglang_argv(MODEL, DRAFT, params, 30000)
    parsed = parse_like_sglang(argv)
    for field, value in expected_server_args(params, DRAFT).items():
        assert parsed[field] == value, field


def test_recorded_server_info_verifies_the_requested_ddtree_config():
    info = fixture("sglang_get_server_info_ddtree_b8_w2048.json")
    params = DecodeParams("ddtree", budget=8, topk=6, window=2048)
    _, env = sglang_argv(MODEL, DRAFT, params, 30000)
    for field, value in expected_server_args(params, DRAFT).items():
        assert info[field] == value, field
    assert compare_sglang_config(params.to_dict(), reported(info, env)) == []


@pytest.mark.parametrize(
    ("params", "wrong_field"),
    [
        (DecodeParams("ddtree", budget=16, topk=6, window=2048), "speculative_ddtree_budget"),
        (
            DecodeParams("ddtree", budget=8, topk=6, window=None),
            "speculative_dflash_draft_window_size",
        ),
        (DecodeParams("dflash", window=2048), "speculative_algorithm"),
    ],
)
def test_a_stale_or_different_server_is_a_mismatch(params, wrong_field):
    info = fixture("sglang_get_server_info_ddtree_b8_w2048.json")
    mismatches = compare_sglang_config(params.to_dict(), reported(info, {TOPK_ENV: "6"}))
    assert any(m.startswith(wrong_field) for m in mismatches), mismatches


def test_topk_is_checked_through_the_process_environment():
    info = fixture("sglang_get_server_info_ddtree_b8_w2048.json")
    params = DecodeParams("ddtree", budget=8, topk=4, window=2048)
    mismatches = compare_sglang_config(params.to_dict(), reported(info, {TOPK_ENV: "6"}))
    assert mismatches == [f"{TOPK_ENV}: requested '4', server reports '6'"]


def test_ar_and_dflash_fixtures_verify_their_own_configs():
    ar = fixture("sglang_get_server_info_ar.json")
    assert compare_sglang_config({"mode": "ar"}, reported(ar, {})) == []
    dflash = fixture("sglang_get_server_info_dflash_wnone.json")
    assert compare_sglang_config({"mode": "dflash", "window": None}, reported(dflash, {})) == []
    assert compare_sglang_config({"mode": "ar"}, reported(dflash, {})) != []


def test_meta_info_gives_the_acceptance_length_of_one_request():
    reply = fixture("sglang_generate_response.json")
    meta = reply["meta_info"]
    record = StreamRecord(
        text=reply["text"], output_tokens=meta["completion_tokens"], meta_info=meta
    )
    value, weight = request_acceptance("sglang", record)
    assert value == pytest.approx(64 / 20)
    assert weight == 20
    ar_record = StreamRecord(meta_info={k: v for k, v in meta.items() if k != "spec_verify_ct"})
    assert request_acceptance("sglang", ar_record) == (None, 0.0)
