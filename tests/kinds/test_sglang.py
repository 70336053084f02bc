"""SGLang kind: argv per mode, readiness against `/get_server_info` fixtures with the
process environment as the top-k witness, the /generate stream, meta_info acceptance."""

from __future__ import annotations

import argparse

import pytest

from ddtune.bench.client import StreamRecord
from ddtune.errors import UserError
from ddtune.kinds import Launch, get_kind
from ddtune.kinds.sglang import TOPK_ENV, expected_server_args, sglang_argv
from ddtune.launchers.__main__ import build, build_parser
from ddtune.params import DecodeParams, SamplingParams

MODEL, DRAFT = "/models/Kimi-K2-Instruct", "/models/Kimi-K2-DFlash"
INFO_B8 = "sglang_get_server_info_ddtree_b8_w2048.json"
SGLANG = get_kind("sglang")


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


def launched(witness, params: DecodeParams, topk_env: str | None = None, drafter=DRAFT) -> Launch:
    """A real process started like SGLang would be for `params` (its env carries top-k)."""
    argv, env = sglang_argv(MODEL, drafter, params, 30000)
    if topk_env is not None:
        env[TOPK_ENV] = topk_env
    return witness(env, argv)


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
    argv, env = sglang_argv(MODEL, DRAFT, DecodeParams("dflash", window=None), 30000)
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


@pytest.mark.parametrize(
    "params",
    [DecodeParams("ddtree", 8, 4, 2048), DecodeParams("dflash", window=None), DecodeParams("ar")],
    ids=lambda p: p.label(),
)
def test_readiness_expects_exactly_the_launched_server_args(params):
    """Readiness (`expected_config`) uses `expected_server_args` with the launch's drafter,
    whether the command is SGLang's own or `python -m ddtune.launchers sglang`."""
    direct, _ = sglang_argv(MODEL, DRAFT if params.mode != "ar" else None, params, 30000)
    wire = params.to_wire()
    front = ["python", "-m", "ddtune.launchers", "sglang", "--model-path", MODEL]
    front += ["--draft-model-path", DRAFT, "--mode", wire["mode"], "--budget", str(wire["budget"])]
    front += ["--topk", str(wire["topk"]), "--window", str(wire["window"])]
    assert build(build_parser().parse_args(front[3:]))[0][3:] == direct[3:]
    want = expected_server_args(params, DRAFT)
    assert SGLANG.expected_config(params, Launch(argv=direct)) == want
    assert SGLANG.expected_config(params, Launch(argv=front)) == want
    assert all(parse_like_sglang(direct)[field] == value for field, value in want.items())


def test_recorded_server_info_verifies_the_requested_ddtree_config(fixture, witness):
    info = fixture(INFO_B8)
    params = DecodeParams("ddtree", budget=8, topk=6, window=2048)
    for field, value in expected_server_args(params, DRAFT).items():
        assert info[field] == value, field
    launch = launched(witness, params)
    assert SGLANG.config_mismatches(params, info, launch) == []
    assert SGLANG.identity_of(info, launch)["server_info"][TOPK_ENV] == "6"


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
def test_a_stale_or_different_server_is_a_mismatch(fixture, witness, params, wrong_field):
    mismatches = SGLANG.config_mismatches(
        params, fixture(INFO_B8), launched(witness, params, topk_env="6")
    )
    assert any(m.startswith(wrong_field) for m in mismatches), mismatches


def test_topk_is_checked_through_the_process_environment(fixture, witness):
    params = DecodeParams("ddtree", budget=8, topk=4, window=2048)
    launch = launched(witness, params, topk_env="6")
    mismatches = SGLANG.config_mismatches(params, fixture(INFO_B8), launch)
    assert mismatches == [f"{TOPK_ENV}: requested '4', server reports '6'"]
    # without a process to read, top-k cannot be witnessed and is not compared
    assert SGLANG.config_mismatches(params, fixture(INFO_B8), Launch(argv=launch.argv)) == []


def test_the_drafter_is_checked_against_the_launch_command(fixture, witness):
    params = DecodeParams("ddtree", budget=8, topk=6, window=2048)
    launch = launched(witness, params, drafter="/models/Other-DFlash")
    assert SGLANG.config_mismatches(params, fixture(INFO_B8), launch) == [
        "speculative_draft_model_path: requested '/models/Other-DFlash', "
        "server reports '/models/Kimi-K2-DFlash'"
    ]
    # a command that names no drafter (e.g. a wrapper script) leaves it unchecked
    assert SGLANG.config_mismatches(params, fixture(INFO_B8), Launch()) == []


def test_ar_and_dflash_fixtures_verify_their_own_configs(fixture):
    ar, dflash = (
        fixture("sglang_get_server_info_ar.json"),
        fixture("sglang_get_server_info_dflash_wnone.json"),
    )
    dflash_params = DecodeParams("dflash", window=None)
    assert SGLANG.config_mismatches(DecodeParams("ar"), ar, Launch()) == []
    launch = Launch(argv=sglang_argv(MODEL, DRAFT, dflash_params, 30000)[0])
    assert SGLANG.config_mismatches(dflash_params, dflash, launch) == []
    assert SGLANG.config_mismatches(DecodeParams("ar"), dflash, Launch()) != []


def test_generate_request_and_cumulative_stream(fixture):
    sampling = SamplingParams(max_new_tokens=16, stop_strings=("\ndef",), ignore_eos=True)
    url, body = SGLANG.generate_request("http://h:1", "def f():\n", sampling, model="ignored")
    assert url == "http://h:1/generate" and body["stream"] is True and "model" not in body
    assert body["sampling_params"] == {
        "max_new_tokens": 16,
        "temperature": 0.0,
        "ignore_eos": True,
        "stop": ["\ndef"],
    }
    first = SGLANG.parse_chunk({"text": "    return", "meta_info": {}}, "")
    assert (first.text, first.meta_info, first.finish_reason) == ("    return", None, None)
    meta = {"completion_tokens": 3, "finish_reason": {"type": "length"}}
    last = SGLANG.parse_chunk({"text": "    return 1", "meta_info": meta}, "    return")
    assert (last.text, last.finish_reason, last.meta_info) == (" 1", "length", meta)
    assert SGLANG.parse_chunk({"text": " 2"}, "    return 1").text == " 2"  # incremental


def test_meta_info_gives_the_acceptance_length_of_one_request(fixture):
    reply = fixture("sglang_generate_response.json")
    meta = reply["meta_info"]
    record = StreamRecord(
        text=reply["text"], output_tokens=meta["completion_tokens"], meta_info=meta
    )
    value, weight = SGLANG.response_acceptance(record)
    assert value == pytest.approx(64 / 20)
    assert weight == 20
    ar_record = StreamRecord(meta_info={k: v for k, v in meta.items() if k != "spec_verify_ct"})
    assert SGLANG.response_acceptance(ar_record) == (None, 0.0)
