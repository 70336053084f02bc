"""The files a launch command names are checked before anything stops (issue 44, item 7):
where ddtune runs the command itself, a missing executable, engine Python, target or
drafter is refused (exit 2, the path named, the engine check on or off, 0 starts of the
FAKE service); under systemd or hooks a path absent here is said to be checked at the
canary; a hub id (`org/name`) is the engine's to fetch."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ddtune.cli import main
from ddtune.sweep.checks.launch_paths import check_launch_paths
from ddtune.sweep.plan.strategies import parse_spec

CONFIGS = """
    [[configs]]
    mode = "ddtree"
    budget = 4
    topk = 2
"""


def spec_with(tmp_path: Path, writer, port: int, args: str = "", python: str | None = None):
    ledger = tmp_path / "starts.txt"
    service = f'env = {{ FAKE_COUNT_STARTS = "{ledger}" }}\nengine_check = false'
    path = writer(tmp_path, "paths", CONFIGS, port, service=service, args=args)
    if python is not None:
        text = path.read_text()
        path.write_text(re.sub(r'command = \["[^"]+"', f'command = ["{python}"', text, count=1))
    return path, ledger


CASES = {
    "a drafter": ('"--drafter", "/nonexistent/Kimi-K2-DFlash"', None, "the drafter /nonexistent"),
    "a target": ('"--target", "./no-such-model"', None, "the target model"),
    "the executable": ("", "/nonexistent/venv/bin/python", "the executable /nonexistent/venv"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("command", ["plan", "run"])
def test_a_path_missing_where_ddtune_runs_the_command_is_refused_before_any_start(
    case, command, tmp_path, fake_spec_writer, port, capsys
):
    args, python, said = CASES[case]
    spec, ledger = spec_with(tmp_path, fake_spec_writer, port, args, python)
    flag = "--store"
    code = main(["sweep", command, str(spec), flag, str(tmp_path / "s" / "store.sqlite")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and said in err[0] and "is not on this machine" in err[0], err
    assert not ledger.exists(), "the service was started"


def test_paths_that_are_there_pass(tmp_path, fake_spec_writer, port, capsys):
    (tmp_path / "models" / "d").mkdir(parents=True)
    spec, _ = spec_with(tmp_path, fake_spec_writer, port, f'"--drafter", "{tmp_path}/models/d"')
    from ddtune.sweep.plan.strategies import read_spec

    check_launch_paths(read_spec(spec), tmp_path / "s.sqlite")
    assert capsys.readouterr().err == ""


UNIT = """
[sweep]
name = "unit"
[space]
mode = ["ddtree"]
budget = [4, 8]
[service]
control = "systemd"
unit = "llm.service"
command = ["/opt/sglang/bin/python", "-m", "sglang.launch_server", "--model-path", "{model}",
           "--speculative-draft-model-path", "/models/Kimi-K2-DFlash", "--port", "{port}",
           "--speculative-ddtree-budget", "{budget}"]
vars = { model = "/models/Kimi-K2-Instruct" }
"""


def test_under_systemd_a_path_absent_here_is_said_to_be_checked_at_the_canary(capsys):
    spec = parse_spec(UNIT, source="unit.toml")
    check_launch_paths(spec, Path("s.sqlite"))  # no refusal: systemd may see other files
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("note: unit.toml: not on this machine: the executable /opt/sglang")
    assert "the target model /models/Kimi-K2-Instruct" in err and "the drafter /models/" in err
    assert "under systemd (unit llm.service" in err and "ddtune sweep canary unit.toml" in err


def test_a_hub_id_is_not_a_local_path(capsys):
    text = UNIT.replace('control = "systemd"\nunit = "llm.service"\n', "").replace(
        "/models/Kimi-K2-Instruct", "moonshotai/Kimi-K2-Instruct"
    )
    text = text.replace("/opt/sglang/bin/python", "python3").replace(
        '"--speculative-draft-model-path", "/models/Kimi-K2-DFlash", ', ""
    )
    check_launch_paths(parse_spec(text, source="hub.toml"), Path("s.sqlite"))
    assert capsys.readouterr().err == ""
