"""Every swept key must reach the service (issue 44, item 2): `sweep plan` and `sweep run`
render every config's launch before anything stops, with the engine check on or off, and
refuse (exit 2, one line naming the key) a key that changes nothing the service is started
with, or two configs that render the same launch. The FAKE fault server counts its starts
in $FAKE_COUNT_STARTS: none for every refused spec. Every example spec passes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ddtune.cli import main
from ddtune.sweep.checks.launch_axes import check_axes_reach
from ddtune.sweep.plan.strategies import parse_spec, read_spec

ROOT = Path(__file__).resolve().parents[3]
GRID = """
    [space]
    mode = ["ddtree"]
    budget = [4, 8]
    topk = [2, 4]
"""
LOCKSTEP = """
    [[configs]]
    mode = "ddtree"
    budget = 4
    topk = 2
    [[configs]]
    mode = "ddtree"
    budget = 8
    topk = 4
"""
MODES = """
    [[configs]]
    mode = "ar"
    [[configs]]
    mode = "dflash"
"""


def refused_spec(tmp_path: Path, writer, port: int, configs: str, drop: list[str]) -> Path:
    """A FAKE-server spec whose command leaves out the placeholders in `drop`."""
    ledger = tmp_path / "starts.txt"
    service = f'env = {{ FAKE_COUNT_STARTS = "{ledger}" }}'
    path = writer(tmp_path, "axes", configs, port, service=service)
    text = path.read_text()
    for name in drop:
        text, found = re.subn(rf'"--{name}", "{{{name}}}",\s*', "", text)
        assert found == 1, f"no --{name} {{{name}}} in the command"
    path.write_text(text)
    return path


CASES = {
    "topk missing from the command": (GRID, ["topk"], "space.topk: swept, but it appears"),
    "budget and topk missing": (GRID, ["budget", "topk"], "space.budget, space.topk: swept"),
    "a key swept in lockstep with one that reaches": (
        LOCKSTEP,
        ["topk"],
        "topk of [[configs]]: swept",
    ),
    "modes without {mode}": (MODES, ["mode"], "differ in mode"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("command", ["plan", "run"])
@pytest.mark.parametrize("engine_check", [True, False])
def test_a_key_that_reaches_no_launch_is_refused_before_any_start(
    case, command, engine_check, tmp_path, fake_spec_writer, port, capsys
):
    configs, drop, said = CASES[case]
    spec = refused_spec(tmp_path, fake_spec_writer, port, configs, drop)
    if not engine_check:
        spec.write_text(
            spec.read_text().replace("[service]\n", "[service]\nengine_check = false\n")
        )
    flag = "--store"
    code = main(["sweep", command, str(spec), flag, str(tmp_path / "s" / "store.sqlite")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and said in err[0], err
    assert "render the same" in err[0]
    assert not (tmp_path / "starts.txt").exists(), "the service was started"


def test_the_same_spec_with_every_placeholder_passes(tmp_path, fake_spec_writer, port):
    spec = read_spec(refused_spec(tmp_path, fake_spec_writer, port, GRID, []))
    check_axes_reach(spec, tmp_path / "s.sqlite")  # no refusal


def test_a_unit_that_keeps_its_own_execstart_takes_no_swept_key():
    text = """
[sweep]
name = "unit"
[space]
mode = ["ddtree"]
budget = [4, 8]
[service]
control = "systemd"
unit = "llm.service"
"""
    spec = parse_spec(text, source="t.toml")
    with pytest.raises(Exception, match="the unit's own ExecStart= runs unchanged") as caught:
        check_axes_reach(spec, Path("s.sqlite"))
    assert getattr(caught.value, "key", None) == "space.budget"


def test_hooks_get_every_value_so_nothing_is_refused():
    text = """
[sweep]
name = "hooks"
[space]
mode = ["ddtree"]
budget = [4, 8]
[service]
control = "hooks"
hooks = { start = "true", stop = "true" }
"""
    check_axes_reach(parse_spec(text, source="t.toml"), Path("s.sqlite"))


EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.toml") if p.name != "serve.toml")


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_reaches_its_service_with_every_key(example):
    check_axes_reach(read_spec(example), Path("s.sqlite"))
