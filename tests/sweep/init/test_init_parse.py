"""Reading a launch command: unit files as systemd reads them, flags as the engine reads them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddtune.errors import UserError
from ddtune.sweep.init.method_space import around, windows_around
from ddtune.sweep.init.parse import find_engine, parse_launch
from ddtune.sweep.init.source import from_command, parse_unit

RECORDED = Path(__file__).parents[2] / "engines" / "fixtures" / "sglang_engine_info.json"


def test_a_unit_is_read_as_systemd_reads_it():
    text = """[Unit]
Description=x
[Service]
Environment="A=1 2" B=3
Environment=C=4
ExecStart=/bin/old
ExecStart=
ExecStart=-/opt/py -m sglang.launch_server \\
    --model-path '/m/a b' \\
    --port 1
User=sglang
[Install]
ExecStart=/not/a/service/key
"""
    source = parse_unit(text, "u.service", "the unit u.service")
    assert source.argv == (
        "/opt/py",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/m/a b",
        "--port",
        "1",
    )
    assert source.env == {"A": "1 2", "B": "3", "C": "4"}
    assert (source.unit, source.user) == ("u.service", "sglang")


def test_an_empty_execstart_in_a_drop_in_leaves_none():
    text = "[Service]\nExecStart=/bin/x\n# /etc/systemd/system/u.service.d/o.conf\n[Service]\nExecStart=\n"
    with pytest.raises(UserError, match="no ExecStart="):
        parse_unit(text, "u.service", "the unit u.service")


def test_the_engines_own_table_resolves_aliases_and_abbreviations():
    """SGLang 0.5.23's recorded option table: `--model` is `--model-path`'s alias,
    `--speculative-draft-model` the drafter's, `--tensor-parallel-size` tp's, and argparse
    takes the unique prefix `--speculative-num-draft`."""
    options = json.loads(RECORDED.read_text())["options"]
    argv = ["py", "-m", "sglang.launch_server", "--model", "/m", "--speculative-algorithm=DFLASH"]
    argv += ["--speculative-draft-model", "/d", "--tensor-parallel-size", "4"]
    argv += ["--speculative-num-draft", "8", "--mem-fraction-static", "0.8", "--enable-metrics"]
    launch = parse_launch(find_engine(tuple(argv)), options)
    assert (launch.model, launch.drafter, launch.method, launch.tp) == ("/m", "/d", "DFLASH", 4)
    assert launch.knobs == {"speculative_num_draft_tokens": 8}
    assert launch.parser == "the engine's own parser"
    assert launch.kept(
        "model_path",
        "speculative_draft_model_path",
        "speculative_algorithm",
        "tp_size",
        "speculative_num_draft_tokens",
    ) == ["--mem-fraction-static", "0.8", "--enable-metrics"]


def test_vllm_serve_takes_its_model_as_a_word_and_braces_are_kept_literal():
    config = '{"method": "ngram", "num_speculative_tokens": 3}'
    argv = ("/v/bin/vllm", "serve", "/m", "--speculative-config", config, "--x", "{y}")
    found = find_engine(argv)
    assert (found.python, found.positional_model) == ("/v/bin/python", "/m")
    launch = parse_launch(found, None)
    assert launch.method == "ngram" and launch.knobs == {"num_speculative_tokens": 3}
    assert launch.template({"speculative_config": "{sc}"}) == [
        "--speculative-config",
        "{sc}",
        "--x",
        "{{y}}",
    ]


def test_the_command_line_needs_a_command():
    with pytest.raises(UserError, match="after `--`"):
        from_command(["--"])


def test_values_around_the_current_one():
    assert around(8, step=2) == [4, 6, 8, 10, 12]
    assert around(1) == [1, 2, 3]  # nothing below 1
    assert around(15, high=15) == [13, 14, 15]  # the drafter's block
    assert windows_around(2048, None) == [1024, 2048, "none"]
    assert windows_around(None, 4096) == [1024, "none"]  # within a small context


def test_ddtree_knobs_the_unit_sets_are_kept_at_their_values():
    """SGLANG_DDTREE_DEPTH_BONUS in the unit's environment: the baseline and the space keep it,
    and the launcher sets it (readiness expects exactly the variables the launch sets)."""
    import tomllib

    from ddtune.engines.launch import build, launcher_parser
    from ddtune.sweep.init.build import build_spec
    from ddtune.sweep.init.source import LaunchSource
    from ddtune.sweep.plan import parse_spec

    argv = ("/nowhere/python", "-m", "sglang.launch_server", "--model-path", "/m")
    argv += ("--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", "/d")
    argv += ("--speculative-ddtree-budget", "8")
    env = {"SGLANG_DDTREE_DEPTH_BONUS": "0.3", "SGLANG_DDTREE_MAX_TOPK": "4"}
    text = build_spec(LaunchSource(argv, env, "u.service"), front="/ddtune/python").text
    doc = tomllib.loads(text)
    assert doc["sweep"]["baseline"]["depth_bonus"] == 0.3
    assert doc["space"]["depth_bonus"] == [0.3]
    spec = parse_spec(text, source="test")
    assert spec.baseline is not None
    command = spec.service.render_argv(spec.baseline.params, spec.baseline.user_vars())
    _, added = build(launcher_parser().parse_args(command[3:]))
    assert added == {"SGLANG_DDTREE_MAX_TOPK": "4", "SGLANG_DDTREE_DEPTH_BONUS": "0.3"}
