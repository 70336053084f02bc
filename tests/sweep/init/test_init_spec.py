"""`ddtune sweep init` on the recorded launch commands (fixtures/): as a unit file, as a unit
name (`systemctl cat`, FAKE systemd) and as an argv: every flag kept, `sweep plan` exit 0
with the engine's check (FAKE SGLang / vLLM parsers) accepting every launch command."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest

from ddtune.cli import main
from ddtune.engines.launch import engine_command, engine_of
from ddtune.engines.parser_probe import EngineCommand, EngineInfo
from ddtune.methods import sglang_reported
from ddtune.sweep.init.parse import find_engine
from ddtune.sweep.plan import read_spec

from .conftest import UNITS, Installed


def init(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["sweep", "init", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def plan(capsys, spec: Path) -> tuple[int, str]:
    code = main(["sweep", "plan", str(spec)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def install_unit(root: Path, installed: Installed, name: str) -> None:
    (root / "units" / name).write_text(installed.unit_text(name))
    subprocess.run(["systemctl", "daemon-reload"], check=True)


@pytest.mark.parametrize("unit", UNITS)
def test_a_unit_by_name_gives_a_spec_the_plan_accepts(installed, fake_systemd, unit, capsys):
    root, _ = fake_systemd
    install_unit(root, installed, unit)
    out = installed.root / "spec.toml"
    code, printed, err = init(capsys, "--from-unit", unit, "--out", str(out))
    assert code == 0, err
    assert "restart(s)" in printed and " h" in printed  # the plan's cost, printed at the end
    doc = tomllib.loads(out.read_text())
    assert doc["service"]["control"] == "systemd" and doc["service"]["unit"] == unit
    assert doc["service"]["engine"] == unit.split("-")[0]
    assert not {"kind", "profile"} & doc["service"].keys()  # the old names are not written
    code, text = plan(capsys, out)
    assert code == 0, text
    assert "accepted all" in text and "is now called" not in text


@pytest.mark.parametrize("unit", UNITS)
def test_an_argv_gives_a_process_spec_the_plan_accepts(installed, unit, capsys):
    out = installed.root / "spec.toml"
    code, _, err = init(capsys, "--out", str(out), "--from-command", "--", *installed.argv(unit))
    assert code == 0, err
    doc = tomllib.loads(out.read_text())
    assert doc["service"]["control"] == "process" and "unit" not in doc["service"]
    windows = [w for w in doc.get("space", {}).get("window", []) if isinstance(w, int)]
    assert doc["bench"]["long"]["prompt_tokens"] > max(windows, default=0)
    code, text = plan(capsys, out)
    assert code == 0, text
    assert "accepted all" in text


@pytest.mark.parametrize("unit", UNITS)
def test_the_baseline_is_the_command_as_it_runs_every_flag_kept(installed, unit, capsys):
    """The spec's baseline, rendered and built as the engine would read it, has exactly
    the flags and values of the recorded command (SGLang's default host written out)."""
    out = installed.root / "spec.toml"
    unit_file = installed.unit_file(unit)
    assert init(capsys, "--from-unit", str(unit_file), "--out", str(out))[0] == 0
    spec = read_spec(out)
    base = spec.baseline
    assert base is not None
    argv = spec.service.render_argv(base.params, base.user_vars())
    found = engine_of(argv, spec.service.engine)
    assert found is not None
    window = {"--speculative-draft-window-size": "speculative_draft_window_size"}
    info = EngineInfo(found.kind.name, "0.5.23", window, argv[0], "test")
    built = engine_command(
        found, argv, spec.service.render_env(base.params, base.user_vars()), info
    )
    original = find_engine(tuple(installed.argv(unit)))
    expected = flag_values(EngineCommand(original.python, "", original.args))
    if original.positional_model:
        expected.append(("--model", original.positional_model))
    if original.engine == "sglang" and not any(f == "--host" for f, _ in expected):
        expected.append(("--host", "127.0.0.1"))  # SGLang's default, written by the launcher
    assert sorted(flag_values(built)) == sorted(expected)
    if "SGLANG_DDTREE_MAX_TOPK" in installed.unit_text(unit):
        assert built.env["SGLANG_DDTREE_MAX_TOPK"] == "4"


def flag_values(command: EngineCommand) -> list[tuple[str, object]]:
    """(flag, value) pairs, a JSON value parsed (spacing is not a difference)."""
    return [
        (flag, json.loads(value) if value and value.startswith("{") else value)
        for flag, value in command.flags()
    ]


def test_the_ddtree_space_surrounds_the_running_config(installed, capsys):
    out = installed.root / "spec.toml"
    argv = installed.argv("sglang-ddtree.service")
    assert init(capsys, "--out", str(out), "--from-command", "--", *argv)[0] == 0
    doc = tomllib.loads(out.read_text())
    assert doc["sweep"]["baseline"] == {"mode": "ddtree", "window": 2048, "budget": 8, "topk": 6}
    assert doc["space"]["budget"] == [4, 6, 8, 10, 12]  # two more on each side
    assert doc["space"]["topk"] == [5, 6, 7]  # SGLang's default 6: the argv carries no env
    assert doc["space"]["window"] == [1024, 2048, "none"]  # smaller, current, none
    assert doc["bench"]["long"]["prompt_tokens"] > 2048  # past every window swept


def test_the_units_topk_variable_is_the_current_topk(installed, capsys):
    out = installed.root / "spec.toml"
    unit = installed.unit_file("sglang-ddtree.service")
    assert init(capsys, "--from-unit", str(unit), "--out", str(out))[0] == 0
    doc = tomllib.loads(out.read_text())
    assert doc["sweep"]["baseline"]["topk"] == 4
    assert doc["space"]["topk"] == [3, 4, 5]


def test_dflash_chain_lengths_stop_at_the_drafters_block(installed, capsys):
    out = installed.root / "spec.toml"
    unit = installed.unit_file("sglang-dflash.service")
    assert init(capsys, "--from-unit", str(unit), "--out", str(out))[0] == 0
    doc = tomllib.loads(out.read_text())
    assert doc["space"]["vars"]["draft_tokens"] == [14, 15, 16]  # block_size 16
    assert doc["space"]["window"] == [2048, "none"]  # the service runs none
    assert doc["sweep"]["baseline"]["vars"] == {"draft_tokens": 16}


def test_eagle3_configs_name_the_method_and_keep_sglangs_ties_between_knobs(installed, capsys):
    out = installed.root / "spec.toml"
    unit = installed.unit_file("sglang-eagle3.service")
    assert init(capsys, "--from-unit", str(unit), "--out", str(out))[0] == 0
    doc = tomllib.loads(out.read_text())
    drafter = str(installed.models / "Llama-3.3-70B-EAGLE3")
    assert doc["sweep"]["baseline"] == {
        "method": "eagle3",
        "num_steps": 3,
        "topk": 1,
        "num_draft_tokens": 4,
        "drafter": drafter,
    }
    assert "{method_args}" in doc["service"]["command"]
    assert not any(a.startswith("--speculative") for a in doc["service"]["command"])
    settings = [c for c in doc["configs"] if c.pop("method") == "eagle3"]
    assert len(settings) == len(doc["configs"]) and all(
        s.pop("drafter") == drafter for s in settings
    )
    assert {"num_steps": 3, "topk": 1, "num_draft_tokens": 4} in settings
    assert {s["num_steps"] for s in settings} == {1, 2, 3, 4, 5}
    for s in settings:
        if s["topk"] == 1:
            assert s["num_draft_tokens"] == s["num_steps"] + 1
        assert s["num_draft_tokens"] <= s["num_steps"] * s["topk"] + 1


def test_eagle3_baseline_reads_back_as_sglang_reports_it(installed, capsys):
    """The written spec's baseline expects what SGLang running the original command reports
    (`/server_info`): the algorithm and the knobs, not "no speculative algorithm"."""
    out = installed.root / "spec.toml"
    argv = installed.argv("sglang-eagle3.service")
    assert init(capsys, "--out", str(out), "--from-command", "--", *argv)[0] == 0
    spec = read_spec(out)
    assert spec.baseline is not None
    reported = sglang_reported(spec.baseline.params.method_config())
    assert reported["speculative_algorithm"] == "EAGLE3"
    assert reported["speculative_num_steps"] == 3 and reported["speculative_eagle_topk"] == 1
    assert reported["speculative_num_draft_tokens"] == 4


def test_vllm_dflash_tokens_stop_below_the_block(installed, capsys):
    out = installed.root / "spec.toml"
    unit = installed.unit_file("vllm-dflash.service")
    assert init(capsys, "--from-unit", str(unit), "--out", str(out))[0] == 0
    doc = tomllib.loads(out.read_text())
    assert doc["space"]["method"] == ["dflash"]
    # block 16 = num_speculative_tokens 15 + the bonus token: the drafter's block_size 16
    assert doc["space"]["dflash"]["block_size"] == [14, 15, 16]
    assert doc["space"]["dflash"]["drafter"].endswith("Qwen3-235B-DFlash")
    assert doc["sweep"]["baseline"]["block_size"] == 16


def test_vllm_ngram_sweeps_its_draft_tokens_and_keeps_the_lookup_knobs(installed, capsys):
    out = installed.root / "spec.toml"
    argv = installed.argv("vllm-ngram.service")
    assert init(capsys, "--out", str(out), "--from-command", "--", *argv)[0] == 0
    doc = tomllib.loads(out.read_text())
    assert doc["space"]["ngram"] == {
        "num_draft_tokens": [2, 3, 4, 5, 6],
        "prompt_lookup_max": 4,
        "prompt_lookup_min": 2,
    }
    assert doc["service"]["command"].count("{method_args}") == 1


def test_a_vllm_config_key_no_method_knob_spells_keeps_the_variable_k(installed, capsys):
    argv = installed.argv("vllm-ngram.service")
    i = argv.index("--speculative-config") + 1
    argv[i] = argv[i].replace('"ngram",', '"ngram","disable_by_batch_size":8,')
    out = installed.root / "spec.toml"
    assert init(capsys, "--out", str(out), "--from-command", "--", *argv)[0] == 0
    doc = tomllib.loads(out.read_text())
    assert (
        doc["space"]["vars"]["K"] == [2, 3, 4, 5, 6]
        and "{method_args}" not in doc["service"]["command"]
    )
    assert "'disable_by_batch_size' is not a knob of ddtune's ngram" in out.read_text()


# ---- bad input: one line, exit 2 -------------------------------------------------------------


def one_line_error(capsys, *args: str) -> str:
    code, _, err = init(capsys, *args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ddtune: error: "), err
    return lines[0]


def test_a_unit_without_execstart_is_refused(tmp_path, capsys):
    unit = tmp_path / "bare.service"
    unit.write_text("[Unit]\nDescription=x\n[Service]\nType=simple\n")
    line = one_line_error(capsys, "--from-unit", str(unit), "--out", str(tmp_path / "s.toml"))
    assert "no ExecStart=" in line


def test_an_unknown_engine_is_refused(tmp_path, capsys):
    args = ["--out", str(tmp_path / "s.toml"), "--from-command", "--", "/usr/bin/llama-server"]
    line = one_line_error(capsys, *args, "-m", "/models/x.gguf", "--port", "8080")
    assert "neither SGLang" in line and "nor vLLM" in line


def test_a_unit_that_does_not_exist_is_refused(fake_systemd, tmp_path, capsys):
    line = one_line_error(capsys, "--from-unit", "nosuch.service", "--out", str(tmp_path / "s"))
    assert "nosuch.service" in line and "no such unit" in line


def test_a_command_without_a_model_is_refused(tmp_path, capsys):
    args = ["--out", str(tmp_path / "s.toml"), "--from-command", "--"]
    line = one_line_error(capsys, *args, "python", "-m", "sglang.launch_server", "--port", "1")
    assert "--model-path" in line


def test_an_existing_spec_is_not_overwritten_without_force(installed, capsys):
    out = installed.root / "spec.toml"
    out.write_text("# mine\n")
    argv = ["--from-command", "--", *installed.argv("sglang-eagle3.service")]
    line = one_line_error(capsys, "--out", str(out), *argv)
    assert "--force" in line and out.read_text() == "# mine\n"
    assert init(capsys, "--out", str(out), "--force", *argv)[0] == 0
    assert out.read_text().startswith("# Written by `ddtune sweep init`")


def test_a_command_without_a_method_is_refused(tmp_path, capsys):
    args = ["--out", str(tmp_path / "s.toml"), "--from-command", "--"]
    line = one_line_error(
        capsys, *args, "python", "-m", "sglang.launch_server", "--model-path", "m"
    )
    assert "no speculative method" in line


def test_an_sglang_algorithm_that_is_no_method_is_refused(installed, capsys):
    argv = installed.argv("sglang-eagle3.service")
    argv[argv.index("EAGLE3")] = "STANDALONE"
    out = installed.root / "spec.toml"
    line = one_line_error(capsys, "--out", str(out), "--from-command", "--", *argv)
    assert "SGLang's STANDALONE is not one of ddtune's methods" in line and not out.exists()


def test_sglang_ngram_sweeps_its_draft_tokens_and_keeps_its_other_flags(installed, capsys):
    argv = installed.argv("sglang-eagle3.service")
    start = argv.index("--speculative-algorithm")
    end = argv.index("--tp-size")
    argv[start:end] = [
        "--speculative-algorithm",
        "NGRAM",
        "--speculative-num-draft-tokens",
        "8",
    ]
    out = installed.root / "spec.toml"
    assert init(capsys, "--out", str(out), "--from-command", "--", *argv)[0] == 0
    doc = tomllib.loads(out.read_text())
    assert doc["sweep"]["baseline"] == {"method": "ngram", "num_draft_tokens": 8}
    assert doc["space"] == {"method": ["ngram"], "ngram": {"num_draft_tokens": [6, 7, 8, 9, 10]}}
    command = doc["service"]["command"]
    assert "{method_args}" in command and "--mem-fraction-static" in command
    assert not any(a.startswith("--speculative") for a in command)
    code, text = plan(capsys, out)
    assert code == 0, text


def test_a_service_running_past_its_drafters_block_is_said_and_the_plan_refuses_it(
    installed, capsys
):
    (installed.models / "Qwen3-235B-DFlash" / "config.json").write_text('{"block_size": 8}')
    out = installed.root / "spec.toml"
    argv = installed.argv("sglang-dflash.service")  # runs 16 draft tokens
    assert init(capsys, "--out", str(out), "--from-command", "--", *argv)[0] == 0
    header = " ".join(line.strip("# ") for line in out.read_text().splitlines()[:20])
    assert "the service runs 16 tokens a round, past the drafter's block (8 tokens)" in header
    code, text = plan(capsys, out)
    assert code == 2 and "use --speculative-num-draft-tokens <= 8" in text, text


def test_a_bare_unit_name_is_the_live_unit_never_a_file_of_that_name_here(
    installed, fake_systemd, capsys
):
    """A file in the working folder named like the unit does not shadow systemd's unit
    (`systemctl cat`); the file is read only when given as a path (`./NAME`)."""
    root, _ = fake_systemd
    unit = "sglang-eagle3.service"
    install_unit(root, installed, unit)
    (installed.root / unit).write_text(installed.unit_text("sglang-dflash.service"))
    out = installed.root / "spec.toml"
    code, printed, err = init(capsys, "--from-unit", unit, "--out", str(out))
    assert code == 0, err
    assert "sglang EAGLE3 from the systemd unit sglang-eagle3.service (systemctl cat)" in printed
    code, printed, err = init(capsys, "--from-unit", f"./{unit}", "--out", str(out), "--force")
    assert code == 0, err
    assert f"sglang DFLASH from the unit file {unit}" in printed


def test_a_bare_name_systemd_does_not_know_says_how_to_read_the_file_here(
    installed, fake_systemd, capsys
):
    unit = "only-a-file.service"
    (installed.root / unit).write_text(installed.unit_text("sglang-dflash.service"))
    line = one_line_error(capsys, "--from-unit", unit, "--out", str(installed.root / "s.toml"))
    assert "systemctl cat found no such unit" in line and f"pass ./{unit}" in line
