"""SGLang kind against SGLang 0.5.23's own answers (tests/engines/fixtures/sglang_*, recorded by
tests/integration/capture_sglang_fixtures.py): flag names from its parser's option list, the
fields readiness reads from its /server_info, the process (argv, environment) as the witness
of launch_command, top-k and the DDTree knobs; the /generate stream and meta_info acceptance."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from ddtune.bench.client import StreamRecord
from ddtune.engines import Launch, get_engine
from ddtune.engines.launch import build, launcher_parser
from ddtune.engines.parser_probe import EngineInfo
from ddtune.engines.sglang import (
    BUDGET_FLAG,
    KNOB_ENV,
    TOPK_ENV,
    WINDOW_FIELD,
    WINDOW_FLAGS,
    expected_server_args,
    sglang_argv,
    window_flag,
)
from ddtune.errors import UserError
from ddtune.params import DecodeParams, SamplingParams

MODEL, DRAFT = "/repo/src/ddtune/assets/models/target", "/repo/src/ddtune/assets/models/drafter"
SGLANG = get_engine("sglang")


@pytest.fixture
def sglang_0_5_23(fixture) -> EngineInfo:
    """What the argument probe read from the real SGLang 0.5.23."""
    info = fixture("sglang_engine_info.json")
    return EngineInfo("sglang", info["version"], info["options"], "python", "user")


@pytest.fixture
def ddtree_pr(sglang_0_5_23) -> EngineInfo:
    """0.5.23 with the DDTree pull request's budget flag (what a rebase of #29907 would add)."""
    options = {**sglang_0_5_23.options, BUDGET_FLAG: "speculative_ddtree_budget"}
    return EngineInfo("sglang", "0.5.23+ddtree", options, "python", "user")


def parse_with(engine: EngineInfo, argv: list[str]) -> dict[str, Any]:
    """argv through a parser with exactly the engine's option strings and fields (all take a
    value; ddtune emits no switches): flag -> field as the real parser maps them."""
    parser = argparse.ArgumentParser(allow_abbrev=False, exit_on_error=False, add_help=False)
    for option, dest in engine.options.items():
        if dest != "help":
            parser.add_argument(option, dest=dest)
    assert argv[1:3] == ["-m", "sglang.launch_server"]
    parsed, unknown = parser.parse_known_args(argv[3:])
    if unknown:
        raise ValueError(f"unrecognized arguments: {' '.join(unknown)}")
    return vars(parsed)


def test_0_5_23_knows_the_new_window_flag_and_neither_the_old_nor_ddtree(sglang_0_5_23):
    assert sglang_0_5_23.version == "0.5.23"
    assert window_flag(sglang_0_5_23.options) == "--speculative-draft-window-size"
    for gone in ("--speculative-dflash-draft-window-size", BUDGET_FLAG):
        assert not sglang_0_5_23.has(gone)
    assert sglang_0_5_23.options["--speculative-draft-model"] == "speculative_draft_model_path"


def test_a_release_before_the_rename_gets_the_old_window_flag():
    old = {"--speculative-dflash-draft-window-size": "speculative_dflash_draft_window_size"}
    assert window_flag(old) == "--speculative-dflash-draft-window-size"
    with pytest.raises(UserError, match="has no draft window flag"):
        window_flag({"--model-path": "model_path"}, "0.4.0")


@pytest.mark.parametrize(
    ("params", "drafter"),
    [
        (DecodeParams("dflash", window=64), DRAFT),
        (DecodeParams("dflash", window=None), DRAFT),
        (DecodeParams("ar"), None),
    ],
    ids=lambda v: v.label() if isinstance(v, DecodeParams) else "",
)
def test_every_flag_ddtune_emits_is_one_0_5_23_parses_into_the_field_readiness_reads(
    sglang_0_5_23, params, drafter
):
    window = window_flag(sglang_0_5_23.options)
    argv, env = sglang_argv(MODEL, drafter, params, 30000, window=window)
    parsed = parse_with(sglang_0_5_23, argv)
    for field, value in expected_server_args(params, drafter).items():
        assert parsed[field] == (None if value is None else str(value)), field
    assert env == {}


def test_ddtree_flags_parse_only_with_the_pull_requests_budget(sglang_0_5_23, ddtree_pr):
    params = DecodeParams("ddtree", budget=8, topk=6, window=2048)
    argv, env = sglang_argv(MODEL, DRAFT, params, 30000, ["--max-running-requests", "8"], tp=8)
    with pytest.raises(ValueError, match="unrecognized arguments: --speculative-ddtree-budget 8"):
        parse_with(sglang_0_5_23, argv)
    parsed = parse_with(ddtree_pr, argv)
    for field, value in expected_server_args(params, DRAFT).items():
        assert parsed[field] == str(value), field
    assert (parsed["tp_size"], parsed["max_running_requests"]) == ("8", "8")
    assert env == {TOPK_ENV: "6"}


def test_the_ddtree_knobs_go_to_the_environment_only_when_set():
    params = DecodeParams("ddtree", 8, 4, None, depth_bonus=-0.25, rank_probe=False)
    argv, env = sglang_argv(MODEL, DRAFT, params, 30000)
    assert env == {
        TOPK_ENV: "4",
        KNOB_ENV["depth_bonus"]: "-0.25",
        KNOB_ENV["rank_probe"]: "false",
    }
    assert not [a for a in argv if "bonus" in a or "probe" in a]
    assert sglang_argv(MODEL, DRAFT, DecodeParams("ddtree"), 30000)[1] == {TOPK_ENV: "4"}


def test_the_launcher_front_builds_the_same_command_with_knobs_and_the_window_flag(
    sglang_0_5_23,
):
    front = ["sglang", "--model-path", MODEL, "--draft-model-path", DRAFT, "--mode", "ddtree"]
    front += ["--budget", "8", "--topk", "3", "--window", "64", "--depth-bonus", "0.5"]
    front += ["--rank-probe", "true", "--python", "py", "--", "--max-running-requests", "2"]
    params = DecodeParams("ddtree", 8, 3, 64, depth_bonus=0.5, rank_probe=True)
    expected = sglang_argv(
        MODEL, DRAFT, params, 30000, ["--max-running-requests", "2"], python="py"
    )
    assert build(launcher_parser().parse_args(front), sglang_0_5_23) == expected
    legacy = launcher_parser().parse_args(
        [*front[:-3], f"--window-flag={WINDOW_FLAGS[1]}", *front[-3:]]
    )
    assert build(legacy)[0].count(WINDOW_FLAGS[1]) == 1  # named: the engine is not asked


@pytest.mark.parametrize(
    "extra",
    [
        ["--speculative-draft-window-size", "64"],
        ["--speculative-dflash-draft-window-size=64"],
        ["--speculative-draft-model", "/d"],
        ["--model", "/m"],
        ["--speculative-algo", "DFLASH"],  # argparse would take the abbreviation
    ],
)
def test_extra_arguments_may_not_set_what_ddtune_sets(extra):
    with pytest.raises(UserError, match="set by ddtune"):
        sglang_argv(MODEL, DRAFT, DecodeParams("dflash"), 30000, extra)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"draft_path": None}, "needs a drafter"),
        ({"extra": ["--port=1"]}, "set by ddtune"),
        ({"extra": "--tp 8"}, "list of strings"),
        ({"tp": 0}, "positive number of GPUs"),
    ],
)
def test_bad_input_is_a_clear_user_error(kwargs, message):
    call = {"draft_path": DRAFT, "extra": (), "tp": 1, **kwargs}
    with pytest.raises(UserError, match=message):
        sglang_argv(MODEL, call["draft_path"], DecodeParams(), 30000, call["extra"], tp=call["tp"])


# ---- readiness against SGLang's own /server_info ------------------------------------------


def test_the_real_ar_server_info_reports_every_field_readiness_reads(fixture):
    info = fixture("sglang_server_info_ar.json")
    assert info["version"] == "0.5.23" and len(info) > 500
    for field in ("speculative_algorithm", "speculative_draft_model_path", WINDOW_FIELD):
        assert field in info, field
    assert "speculative_dflash_draft_window_size" not in info
    assert "speculative_ddtree_budget" not in info  # the pull request is not merged
    assert (
        info["max_running_requests"] == 3 and "--max-running-requests 3" in info["launch_command"]
    )
    assert SGLANG.config_mismatches(DecodeParams("ar"), info, Launch()) == []
    assert fixture("sglang_get_server_info_ar.json") == info  # the deprecated twin


def test_ddtree_against_0_5_23_names_the_field_it_does_not_report(fixture):
    info = fixture("sglang_server_info_ar.json")
    lines = SGLANG.config_mismatches(DecodeParams("ddtree", 8, 4, 64), info, Launch())
    assert "speculative_algorithm: requested 'DDTREE', server reports None" in lines
    assert lines[-1] == "SGLang 0.5.23 reports no field speculative_ddtree_budget"


def test_dflash_resolved_by_0_5_23_verifies_its_window(fixture):
    info = fixture("sglang_server_info_dflash_w64.json")
    assert info["speculative_num_draft_tokens"] == 8  # SGLang's own resolution: block size
    launch = Launch(argv=sglang_argv(MODEL, DRAFT, DecodeParams("dflash", window=64), 1)[0])
    assert SGLANG.config_mismatches(DecodeParams("dflash", window=64), info, launch) == []
    wrong = SGLANG.config_mismatches(DecodeParams("dflash", window=None), info, launch)
    assert wrong == [f"{WINDOW_FIELD}: requested None, server reports 64"]


def test_a_server_before_the_rename_reports_the_window_under_the_old_field(fixture):
    info = {**fixture("sglang_server_info_dflash_w64.json")}
    info["speculative_dflash_draft_window_size"] = info.pop(WINDOW_FIELD)
    assert SGLANG.config_mismatches(DecodeParams("dflash", window=64), info, Launch()) == []


def launched(witness, params: DecodeParams, env: dict[str, str] | None = None) -> Launch:
    """A real process started like SGLang would be for `params` (its env carries the knobs)."""
    argv, added = sglang_argv(MODEL, DRAFT, params, 30000)
    return witness({**added, **(env or {})}, argv)


def test_ddtree_readiness_reads_top_k_and_knobs_from_the_process(fixture, witness):
    info = fixture("sglang_server_info_ddtree_b8_w64.json")
    params = DecodeParams("ddtree", 8, 6, 64, depth_bonus=0.5)
    launch = launched(witness, params)
    assert SGLANG.config_mismatches(params, info, launch) == []
    reported = SGLANG.identity_of(info, launch)["server_info"]
    assert (reported[TOPK_ENV], reported[KNOB_ENV["depth_bonus"]]) == ("6", "0.5")
    assert reported[KNOB_ENV["rank_probe"]] is None  # not set: SGLang's default


@pytest.mark.parametrize(
    ("env", "line"),
    [
        ({TOPK_ENV: "4"}, f"{TOPK_ENV}: requested '6', server reports '4'"),
        (
            {KNOB_ENV["rank_probe"]: "true"},
            f"{KNOB_ENV['rank_probe']}: requested None, server reports 'true'",
        ),
    ],
)
def test_a_process_with_other_knobs_is_a_mismatch(fixture, witness, env, line):
    params = DecodeParams("ddtree", 8, 6, 64)
    launch = launched(witness, params, env)
    info = fixture("sglang_server_info_ddtree_b8_w64.json")
    assert SGLANG.config_mismatches(params, info, launch) == [line]
    # without a process to read, the environment cannot be witnessed and is not compared
    assert SGLANG.config_mismatches(params, info, Launch(argv=launch.argv)) == []


def test_launch_command_must_be_the_new_processes_own_argv(fixture, witness):
    """The witness for every flag, a user variable's included (--max-running-requests)."""
    info = fixture("sglang_server_info_ar.json")
    tail = info["launch_command"].split()
    same = witness({}, None, process_args=["sglang.launch_server", *tail])
    assert SGLANG.config_mismatches(DecodeParams("ar"), info, same) == []
    other = [*tail[:-1], "2"]  # --max-running-requests 2, while the server runs 3
    lines = SGLANG.config_mismatches(
        DecodeParams("ar"), info, witness({}, None, process_args=["sglang.launch_server", *other])
    )
    assert len(lines) == 1 and lines[0].startswith("launch_command: requested '--model-path")


def test_the_drafter_is_checked_against_the_launch_command(fixture):
    info = fixture("sglang_server_info_dflash_w64.json")
    params = DecodeParams("dflash", window=64)
    other = Launch(argv=sglang_argv(MODEL, "/models/other", params, 1)[0])
    assert SGLANG.config_mismatches(params, info, other) == [
        f"speculative_draft_model_path: requested '/models/other', server reports '{DRAFT}'"
    ]
    assert SGLANG.config_mismatches(params, info, Launch()) == []  # a wrapper names none


# ---- bench: the real /generate stream ------------------------------------------------------


def test_the_real_ar_stream_is_cumulative_and_has_no_speculation(fixture):
    events = [
        line[len("data: ") :]
        for line in fixture("sglang_generate_stream_ar.txt").splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    import json

    text, chunks = "", []
    for event in events:
        chunk = SGLANG.parse_chunk(json.loads(event), text)
        text += chunk.text
        chunks.append(chunk)
    last = json.loads(events[-1])
    assert text == last["text"] and chunks[-1].finish_reason == "length"
    assert all(c.finish_reason is None for c in chunks[:-1])
    record = StreamRecord(text=text, meta_info=chunks[-1].meta_info)
    assert "spec_verify_ct" not in (chunks[-1].meta_info or {})
    assert SGLANG.response_acceptance(record) == (None, 0.0)  # AR: no speculation


def test_generate_request_uses_the_native_endpoint():
    sampling = SamplingParams(max_new_tokens=16, stop_strings=("\ndef",), ignore_eos=True)
    url, body = SGLANG.generate_request("http://h:1", "def f():\n", sampling, model="ignored")
    assert url == "http://h:1/generate" and body["stream"] is True and "model" not in body
    assert body["sampling_params"] == {
        "max_new_tokens": 16,
        "temperature": 0.0,
        "ignore_eos": True,
        "stop": ["\ndef"],
    }
    assert SGLANG.parse_chunk({"text": " 2"}, "    return 1").text == " 2"  # incremental


def test_meta_info_gives_the_acceptance_length_of_one_request(fixture):
    reply = fixture("sglang_generate_response.json")  # hand-written: no speculation on a CPU
    meta = reply["meta_info"]
    record = StreamRecord(
        text=reply["text"], output_tokens=meta["completion_tokens"], meta_info=meta
    )
    value, weight = SGLANG.response_acceptance(record)
    assert value == pytest.approx(64 / 20)
    assert weight == 20
