"""The engine check against a real engine process: the FAKE sglang of tests/engines/fixtures (its
parser and two of SGLang 0.5.23's resolution refusals, with SGLang's messages) runs the
same probe program the real SGLang runs in tests/integration/test_sglang_parser.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.services import ServiceSpec
from ddtune.services.engine_check import EngineCheckReport, PlannedLaunch, check_launches

FAKE_SGLANG = Path(__file__).parents[1] / "engines" / "fixtures" / "fake_sglang"
MODELS = Path(__file__).parents[2] / "src" / "ddtune" / "assets" / "models"
AR = PlannedLaunch("ar", DecodeParams("ar"))
DFLASH = PlannedLaunch("dflash wnone", DecodeParams("dflash"))
DDTREE = PlannedLaunch("ddtree b8 k4 wnone", DecodeParams("ddtree", 8, 4))


def front(*extra: str) -> list[str]:
    """`python -m ddtune.launchers sglang ...` with the FAKE sglang's Python."""
    argv = [sys.executable, "-m", "ddtune.launchers", "sglang", "--python", sys.executable]
    argv += ["--model-path", str(MODELS / "target"), "--draft-model-path", str(MODELS / "drafter")]
    argv += ["--mode", "{mode}", "--budget", "{budget}", "--topk", "{topk}"]
    argv += ["--window", "{window}", "--depth-bonus", "{depth_bonus}"]
    argv += ["--rank-probe", "{rank_probe}", "--port", "{port}"]
    return argv + (["--", *extra] if extra else [])


def sglang_spec(
    command: list[str], pids: Path | None = None, ddtree: bool = False, **table: object
) -> ServiceSpec:
    env = {"PYTHONPATH": str(FAKE_SGLANG)}
    if pids is not None:
        env["FAKE_SGLANG_PIDS"] = str(pids)
    if ddtree:
        env["FAKE_SGLANG_DDTREE"] = "1"
    return ServiceSpec.from_dict({"engine": "sglang", "command": command, "env": env, **table})


def test_one_engine_process_accepts_every_command(tmp_path):
    pids = tmp_path / "pids"
    spec = sglang_spec(front("--device", "cuda"), pids)
    launches = [AR, DFLASH, PlannedLaunch("dflash w64", DecodeParams("dflash", window=64))]
    report = check_launches(spec, launches, tmp_path)
    assert report.ok and report.checked == 3, report.lines()
    assert report.engine is not None and report.engine.name() == "SGLang 0.5.23"
    assert len(pids.read_text().split()) == 1  # one engine process checked all three
    assert (
        report.summary().startswith(f"engine check: SGLang 0.5.23 ({sys.executable}, as ")
        and "accepted all 3 launch command(s)" in report.summary()
    )


def test_a_refusal_names_the_config_parameter_flag_stage_and_the_engines_message(tmp_path):
    spec = sglang_spec(front("--max-runing-requests", "3"))
    report = check_launches(spec, [AR, DFLASH, DDTREE], tmp_path)
    assert [r.line() for r in report.refusals] == [
        "ar: service.command (--max-runing-requests): SGLang 0.5.23 refused it at argparse: "
        "unrecognized arguments: --max-runing-requests 3",
        "dflash wnone: service.command (--max-runing-requests): SGLang 0.5.23 refused it at "
        "argparse: unrecognized arguments: --max-runing-requests 3",
        "ddtree b8 k4 wnone: budget (--speculative-ddtree-budget): SGLang 0.5.23 refused it at "
        "argparse: unrecognized arguments: --speculative-ddtree-budget 8 --max-runing-requests 3",
    ]


def test_an_algorithm_the_engine_cannot_run_is_refused_at_resolution(tmp_path):
    report = check_launches(sglang_spec(front()), [AR, DFLASH, DDTREE], tmp_path)
    assert report.checked == 3 and [r.label for r in report.refusals] == [
        DFLASH.label,
        DDTREE.label,
    ]
    dflash, ddtree = report.refusals
    assert dflash.line() == (
        "dflash wnone: mode (--speculative-algorithm): SGLang 0.5.23 refused it at resolve: "
        "ValueError: DFLASH speculative decoding is not supported by CpuSRTPlatform on device 'cpu'."
    )
    assert (ddtree.parameter, ddtree.flag, ddtree.stage) == (
        "budget",
        "--speculative-ddtree-budget",
        "argparse",
    )


def test_a_user_variable_behind_a_refused_value_is_named(tmp_path):
    command = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(MODELS / "target")]
    command += ["--speculative-algorithm", "DFLASH", "--device", "{device}"]
    spec = sglang_spec(command, vars={"device": "cuda"})
    launches = [
        PlannedLaunch(f"ar device={d}", DecodeParams("ar"), {"device": d}) for d in ("cuda", "cpu")
    ]
    report = check_launches(spec, launches, tmp_path)
    assert [(r.label, r.parameter, r.flag) for r in report.refusals] == [
        ("ar device=cpu", "vars.device", "--device")
    ]


def test_a_knob_variable_the_engine_does_not_define_would_be_ignored_so_it_is_refused(tmp_path):
    """A DDTree build (its fake) that reads SGLANG_DDTREE_MAX_TOPK but not the knobs."""
    spec = sglang_spec(front("--device", "cuda"), ddtree=True)
    plain = PlannedLaunch("ddtree b8 k4", DecodeParams("ddtree", 8, 4))
    bonus = PlannedLaunch("ddtree bonus", DecodeParams("ddtree", 8, 4, depth_bonus=0.5))
    report = check_launches(spec, [plain, bonus], tmp_path)
    assert [r.line() for r in report.refusals] == [
        "ddtree bonus: depth_bonus (SGLANG_DDTREE_DEPTH_BONUS): SGLang 0.5.23 refused it at env: "
        "SGLang 0.5.23 defines no environment variable SGLANG_DDTREE_DEPTH_BONUS "
        "(sglang.srt.environ.Envs): it would be ignored"
    ]


def test_an_extra_argument_the_engine_maps_onto_a_field_ddtune_sets_is_refused(tmp_path):
    report = check_launches(sglang_spec(front("--model-dir", "/other")), [AR], tmp_path)
    assert [r.line() for r in report.refusals] == [
        "ar: service.command (--model-dir): SGLang 0.5.23 refused it at ddtune: --model-dir sets "
        "model_path, which ddtune sets itself; remove it from the extra arguments"
    ]


@pytest.mark.parametrize(
    ("table", "note"),
    [
        ({"engine_check": False}, "[service] engine_check = false"),
        ({"engine": "ddtune"}, "engine 'ddtune' has no argument check of its own"),
        (
            {"control": "systemd", "unit": "x.service", "command": []},
            "no service.command: the unit starts with its own ExecStart",
        ),
    ],
)
def test_skipped_with_a_note_where_there_is_nothing_to_check(tmp_path, table, note):
    spec = sglang_spec(
        table.pop("command", ["/no/such/python", "-m", "sglang.launch_server"]), **table
    )
    report = check_launches(spec, [AR], tmp_path)
    assert report.ok and report.engine is None and report.checked == 0
    assert report.summary() == f"engine check skipped: {note}"


def test_a_command_ddtune_cannot_map_onto_an_engine_names_the_opt_out(tmp_path):
    spec = sglang_spec(["/opt/bin/start-sglang.sh", "--mode", "{mode}"])
    with pytest.raises(UserError, match="engine_check = false") as error:
        check_launches(spec, [AR], tmp_path)
    assert error.value.key == "service.command" and "start-sglang.sh" in str(error.value)


def test_an_interpreter_without_the_engine_is_a_clear_error(tmp_path):
    spec = ServiceSpec.from_dict(
        {"engine": "sglang", "command": front(), "env": {"PYTHONPATH": "/nonexistent"}}
    )
    with pytest.raises(UserError) as error:
        check_launches(spec, [AR], tmp_path)
    text = str(error.value)
    assert "No module named 'sglang'" in text and "engine_check = false" in text
    assert text.count("\n") == 0


def test_the_probe_runs_in_the_services_directory(tmp_path):
    """A relative model path resolves where the service starts (its cwd, else the workdir)."""
    (tmp_path / "models").mkdir()
    command = [sys.executable, "-m", "sglang.launch_server", "--model-path", "models"]
    assert check_launches(sglang_spec(command, cwd=str(tmp_path)), [AR], Path(os.devnull)).ok
    assert check_launches(sglang_spec(command), [AR], tmp_path).ok  # the workdir
    (refused,) = check_launches(sglang_spec(command), [AR], tmp_path / "not-yet").refusals
    assert "'models'" in refused.message  # an empty folder stands in for a workdir to come


def test_an_unknown_flag_is_the_commands_fault_even_with_a_variable_value(tmp_path):
    spec = sglang_spec(front("--max-runing-requests", "{mrr}"), vars={"mrr": 3})
    (refusal,) = check_launches(spec, [PlannedLaunch("ar", DecodeParams("ar"))], tmp_path).refusals
    assert (refusal.parameter, refusal.flag) == (None, "--max-runing-requests")
    assert refusal.line().startswith("ar: service.command (--max-runing-requests): ")


def test_service_env_set_from_a_parameter_is_checked_too(tmp_path):
    """A direct SGLang command with top-k in service.env: 0.5.23 (its fake) would ignore it."""
    command = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(MODELS / "target")]
    spec = ServiceSpec.from_dict(
        {
            "engine": "sglang",
            "command": command,
            "env": {"PYTHONPATH": str(FAKE_SGLANG), "SGLANG_DDTREE_MAX_TOPK": "{topk}"},
        }
    )
    (refusal,) = check_launches(spec, [DDTREE], tmp_path).refusals
    assert (refusal.parameter, refusal.flag, refusal.stage) == (
        "topk",
        "SGLANG_DDTREE_MAX_TOPK",
        "env",
    )


def test_notes_on_accepted_commands_print_after_the_summary():
    report = EngineCheckReport(checked=1, warnings=["the drafter reads the last layer"])
    assert report.lines()[1:] == ["  note: the drafter reads the last layer"]


def test_eagle3_with_the_bundled_head_passes_and_a_missing_head_is_refused(tmp_path):
    """`{method_args}` renders EAGLE3 with the bundled head (`ddtune train eagle3`): the FAKE
    sglang's parser takes every flag and its resolution finds the head's folder; a head that
    is not there is refused. Like SGLang 0.5.23's own resolution (tests/integration/
    test_methods_engine_check.py), it does not read the head's weights or config."""

    def eagle3(head: Path, **knobs: int) -> PlannedLaunch:
        wire = {"method": "eagle3", "method_knobs": {**knobs, "drafter": str(head)}}
        params = DecodeParams.from_wire(wire)
        return PlannedLaunch(params.label(), params)

    head = MODELS / "eagle3"
    assert (head / "config.json").is_file()
    command = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(MODELS / "target")]
    spec = sglang_spec([*command, "--port", "{port}", "{method_args}", "--device", "cuda"])
    chain = eagle3(head, num_steps=3, topk=1)
    tree = eagle3(head, num_steps=5, topk=4, num_draft_tokens=8)
    missing = eagle3(tmp_path / "no-head", num_steps=3, topk=1)
    report = check_launches(spec, [chain, tree, missing], tmp_path)
    assert report.checked == 3 and [r.label for r in report.refusals] == [missing.label]
    (refusal,) = report.refusals
    assert (refusal.parameter, refusal.flag, refusal.stage) == (
        "drafter",
        "--speculative-draft-model-path",
        "resolve",
    )
