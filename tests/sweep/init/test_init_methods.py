"""`ddtune sweep init --methods`: the running method and the others named, each with knobs
that reach the launch command (issue 44, item 1), on the recorded units (fixtures/) with the
FAKE engines' parsers: the spec parses, the engine check accepts every config's command,
every config renders a launch of its own, and a DFLASH unit's DDTree configs carry their
budget flag and top-k variable."""

from __future__ import annotations

import tomllib

import pytest

from ddtune.engines.parser_probe import EngineCommand
from ddtune.sweep.init.parse import find_engine
from ddtune.sweep.plan.strategies import read_spec

from .test_init_spec import flag_values, init, plan


def dflash_to_ddtree(installed, capsys, *more: str):
    out = installed.root / "spec.toml"
    unit = installed.unit_file("sglang-dflash.service")
    code, printed, err = init(
        capsys, "--from-unit", str(unit), "--out", str(out), "--methods", "dflash,ddtree", *more
    )
    assert code == 0, err
    return out, printed


def launches(spec):
    """(argv, env) of every config, baseline first."""
    service = spec.service
    return [
        (
            service.render_argv(c.params, c.user_vars()),
            service.render_env(c.params, c.user_vars()),
        )
        for c, _ in spec.all_configs()
    ]


def test_a_dflash_unit_with_ddtree_gives_both_methods_each_with_its_own_knobs(installed, capsys):
    out, printed = dflash_to_ddtree(installed, capsys)
    doc = tomllib.loads(out.read_text())
    drafter = str(installed.models / "Qwen3-235B-DFlash")
    assert doc["space"]["method"] == ["dflash", "ddtree"]
    assert doc["space"]["dflash"] == {
        "block_size": [14, 15, 16],  # the running 16 draft tokens, within the drafter's block
        "window": [2048, "none"],
        "drafter": drafter,
    }
    assert doc["space"]["ddtree"] == {
        "budget": [8, 16, 32],
        "topk": [4, 6],
        "window": [2048, "none"],
        "drafter": drafter,  # the running DFlash drafter serves DDTree too
    }
    assert "vars" not in doc["space"]  # no variable multiplies the other method's grid
    assert doc["sweep"]["baseline"] == {
        "method": "dflash",
        "window": "none",
        "block_size": 16,
        "drafter": drafter,
    }
    command = doc["service"]["command"]
    assert command.count("{method_args}") == 1
    assert not any(a.startswith("--speculative") for a in command)
    assert "18 config(s)" in printed  # 3 x 2 dflash + 3 x 2 x 2 ddtree
    code, text = plan(capsys, out)
    assert code == 0, text
    assert "accepted all 18 launch command(s)" in text


def test_every_config_renders_a_launch_of_its_own_and_ddtree_carries_its_knobs(installed, capsys):
    out, _ = dflash_to_ddtree(installed, capsys)
    spec = read_spec(out)
    rendered = launches(spec)
    keys = [(tuple(argv), tuple(sorted(env.items()))) for argv, env in rendered]
    assert len(set(keys)) == len(keys) == 18
    for (config, _), (argv, env) in zip(spec.all_configs(), rendered, strict=True):
        params = config.params
        pairs = dict(EngineCommand(argv[0], "", tuple(argv[3:])).flags())
        assert pairs["--speculative-algorithm"] == params.mode.upper()
        if params.mode == "ddtree":
            assert pairs["--speculative-ddtree-budget"] == str(params.budget)
            assert env["SGLANG_DDTREE_MAX_TOPK"] == str(params.topk)
        else:
            assert "SGLANG_DDTREE_MAX_TOPK" not in env
            assert pairs["--speculative-num-draft-tokens"] == str(
                params.method_config().get("block_size")
            )
        window = pairs.get("--speculative-draft-window-size")
        assert window == (None if params.window is None else str(params.window))


def test_the_baseline_still_renders_the_command_the_unit_runs(installed, capsys):
    out, _ = dflash_to_ddtree(installed, capsys)
    spec = read_spec(out)
    assert spec.baseline is not None
    argv = spec.service.render_argv(spec.baseline.params, spec.baseline.user_vars())
    original = find_engine(tuple(installed.argv("sglang-dflash.service")))
    expected = flag_values(EngineCommand(original.python, "", original.args))
    assert sorted(flag_values(EngineCommand(argv[0], "", tuple(argv[3:])))) == sorted(expected)


def test_the_header_says_what_runs_today_and_how_to_add_methods(installed, capsys):
    out = installed.root / "spec.toml"
    unit = installed.unit_file("sglang-dflash.service")
    assert init(capsys, "--from-unit", str(unit), "--out", str(out))[0] == 0
    header = " ".join(line.strip("# ") for line in out.read_text().splitlines()[:12])
    assert "The service runs sglang DFLASH (ddtune's method dflash) today" in header
    assert "--methods dflash,M2,M3=DRAFTER" in header and "ddtree" in header


def test_eagle3_with_ngram_ddtree_and_plain_decoding(installed, capsys):
    out = installed.root / "spec.toml"
    unit = installed.unit_file("sglang-eagle3.service")
    dflash = str(installed.models / "Qwen3-235B-DFlash")
    methods = f"eagle3,ngram,ddtree={dflash},ar"
    code, _, err = init(capsys, "--from-unit", str(unit), "--out", str(out), "--methods", methods)
    assert code == 0, err
    doc = tomllib.loads(out.read_text())
    assert doc["space"]["method"] == ["ngram", "ddtree", "ar"]  # eagle3: its [[configs]]
    assert doc["space"]["ddtree"]["drafter"] == dflash
    assert doc["space"]["ngram"] == {"num_draft_tokens": [4, 8, 12]}
    assert all(c["method"] == "eagle3" for c in doc["configs"])
    code, text = plan(capsys, out)
    assert code == 0 and "accepted all" in text, text


def test_vllm_dflash_with_ngram_eagle3_and_mtp(installed, capsys):
    out = installed.root / "spec.toml"
    unit = installed.unit_file("vllm-dflash.service")
    head = str(installed.models / "Llama-3.3-70B-EAGLE3")
    methods = f"ngram,eagle3={head},mtp"
    code, _, err = init(capsys, "--from-unit", str(unit), "--out", str(out), "--methods", methods)
    assert code == 0, err
    doc = tomllib.loads(out.read_text())
    assert doc["space"]["method"] == ["dflash", "ngram", "eagle3", "mtp"]
    assert doc["space"]["eagle3"] == {"num_steps": [2, 3, 4], "drafter": head}
    assert doc["space"]["mtp"] == {"num_steps": [2, 3, 4]}
    code, text = plan(capsys, out)
    assert code == 0 and "accepted all" in text, text


@pytest.mark.parametrize(
    ("unit", "methods", "said"),
    [
        ("sglang-dflash.service", "dflash,eagle3", "--methods eagle3 needs its draft model"),
        ("vllm-dflash.service", "ddtree", "vllm has no method ddtree (it runs ar, dflash"),
        ("sglang-dflash.service", "ddtree,medusa", "unknown method 'medusa'"),
        ("sglang-dflash.service", "ddtree,ddtree", "--methods names ddtree twice"),
        ("sglang-dflash.service", "ngram=/models/x", "ngram takes no draft model"),
    ],
)
def test_a_method_that_cannot_be_written_is_one_line_and_no_spec(
    installed, capsys, unit, methods, said
):
    out = installed.root / "spec.toml"
    args = ["--from-unit", str(installed.unit_file(unit)), "--out", str(out), "--methods", methods]
    code, _, err = init(capsys, *args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and said in lines[0], err
    assert not out.exists()


def test_the_natural_hand_edit_of_a_dflash_spec_is_refused_naming_the_keys(installed, capsys):
    """The issue's trap: a DFLASH spec edited to `mode = ["ddtree"]` with budgets and top-k
    values, the command left as init wrote it (no {budget}, no {topk}): every DDTree config
    would start with the same flags. The plan refuses it, naming both keys."""
    out = installed.root / "spec.toml"
    unit = installed.unit_file("sglang-dflash.service")
    assert init(capsys, "--from-unit", str(unit), "--out", str(out))[0] == 0
    edited = out.read_text().replace(
        'mode = ["dflash"]', 'mode = ["ddtree"]\nbudget = [4, 8, 12]\ntopk = [4, 6]'
    )
    out.write_text(edited)
    code, text = plan(capsys, out)
    assert code == 2, text
    assert "space.budget, space.topk: swept, but they appear nowhere" in text
    assert "engine check" not in text  # refused before the engine's parser is even asked
