"""Every sweep spec in examples/ (those with a [sweep] table) loads through the sweep spec loader, and the engine
examples render exactly the command lines the launchers build."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from ddtune.engines.launch import build, launcher_parser
from ddtune.engines.parser_probe import EngineInfo
from ddtune.engines.sglang import WINDOW_FLAGS, sglang_argv
from ddtune.engines.vllm import speculative_config, vllm_argv
from ddtune.sweep.plan import read_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SGLANG_INFO = Path(__file__).parents[1] / "engines" / "fixtures" / "sglang_engine_info.json"
SWEEP_SPECS = sorted(p for p in EXAMPLES.glob("*.toml") if "sweep" in tomllib.loads(p.read_text()))


def test_the_engine_examples_are_sweep_specs():
    names = {p.name for p in SWEEP_SPECS}
    assert {"vllm-ngram-cpu.toml", "sglang-ddtree-systemd.toml"} <= names


@pytest.mark.parametrize("path", SWEEP_SPECS, ids=lambda p: p.name)
def test_every_example_sweep_spec_loads(path):
    spec = read_spec(path)
    assert spec.configs or spec.baseline
    for config, _ in spec.all_configs():
        assert spec.service.render_argv(
            config.params, config.user_vars()
        )  # every placeholder is known


def test_vllm_example_renders_the_builder_argv_for_every_k():
    spec = read_spec(EXAMPLES / "vllm-ngram-cpu.toml")
    assert spec.service.engine == "vllm" and spec.service.control == "process"
    extra = [
        "--served-model-name",
        "target",
        "--max-model-len",
        "512",
        "--dtype",
        "float32",
        "--max-num-seqs",
        "4",
    ]
    ks = []
    for config, _ in spec.all_configs():
        values = config.user_vars()
        ks.append(values["K"])
        argv, env = vllm_argv(
            spec.service.vars["model"],
            speculative_config("ngram", values["K"], prompt_lookup_max=3),
            spec.service.port,
            python=".venv-vllm/bin/python",
            cpu_kvcache_gib=1,
        )
        rendered = spec.service.render_argv(config.params, values)
        # same flags and values; the example orders a few of them differently
        assert _flags(rendered) == _flags(argv + extra)
        assert {k: spec.service.env[k] for k in env} == env
    assert ks == [1, 2, 4]


def _flags(argv: list[str]) -> dict[str, str]:
    assert argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    rest = argv[3:]
    return {"python": argv[0], **dict(zip(rest[::2], rest[1::2], strict=True))}


def test_sglang_example_is_the_seed_grid_on_systemd():
    spec = read_spec(EXAMPLES / "sglang-ddtree-systemd.toml")
    service = spec.service
    assert (service.control, service.engine, service.unit) == (
        "systemd",
        "sglang",
        "sglang-kimi.service",
    )
    assert service.timeouts.start >= 600 and service.timeouts.gpu >= 120
    grid = {(c.params.budget, c.params.topk, c.params.window) for c in spec.configs}
    assert grid == {(b, k, w) for b in (4, 8, 12, 16) for k in (4, 6) for w in (2048, None)}
    assert spec.baseline is not None and spec.baseline.params.mode == "ar"
    assert spec.bench.short.enabled and spec.bench.long.enabled and spec.bench.coding.enabled


@pytest.mark.parametrize("index", [0, 1, 2, 5])
def test_sglang_example_command_builds_the_sglang_argv(index):
    spec = read_spec(EXAMPLES / "sglang-ddtree-systemd.toml")
    config, _ = spec.all_configs()[index]
    rendered = spec.service.render_argv(config.params, config.user_vars())
    assert rendered[1:4] == ["-m", "ddtune.launchers", "sglang"]
    info = json.loads(SGLANG_INFO.read_text())  # what SGLang 0.5.23's parser accepts
    engine = EngineInfo("sglang", info["version"], info["options"], "python", "user")
    argv, env = build(launcher_parser().parse_args(rendered[3:]), engine)
    model, drafter = spec.service.vars["model"], spec.service.vars["drafter"]
    extra = rendered[rendered.index("--") + 1 :]
    assert (argv, env) == sglang_argv(
        model, drafter, config.params, 30000, extra, python="/opt/sglang/venv/bin/python", tp=8
    )
    if config.params.mode == "ar":
        assert not [a for a in argv if a.startswith("--speculative")]
    if config.params.window is None:
        assert not set(WINDOW_FLAGS) & set(argv)
    else:
        assert argv[argv.index(WINDOW_FLAGS[0]) + 1] == str(config.params.window)


def test_vllm_dflash_example_renders_the_builder_argv_for_every_k():
    spec = read_spec(EXAMPLES / "vllm-dflash-cpu.toml")
    service = spec.service
    assert (service.control, service.engine, spec.passes_per_start) == ("process", "vllm", 2)
    drafter = "src/ddtune/assets/models/drafter"
    extra = ["--max-model-len", "512", "--dtype", "float32", "--max-num-seqs", "4"]
    seen = []
    for config, is_baseline in spec.all_configs():
        k = config.user_vars()["K"]
        seen.append((config.params.mode, k, is_baseline))
        speculative = speculative_config("dflash", k, draft_path=drafter) if k else None
        argv, env = vllm_argv(
            service.vars["model"],
            speculative,
            service.port,
            python=".venv-vllm/bin/python",
            served_model_name="target",
            cpu_kvcache_gib=1,
        )
        rendered = service.render_argv(config.params, config.user_vars())
        # `{spec}` is one `--flag=value` argument (the baseline repeats --served-model-name)
        assert _flags(_split_equals(rendered)) == _flags(argv + extra)
        assert {name: service.env[name] for name in env} == env
        assert service.render_env(config.params, config.user_vars())["DDTUNE_DFLASH_K"] == str(k)
    assert seen == [("ar", 0, True), ("dflash", 3, False), ("dflash", 7, False)]


def _split_equals(argv: list[str]) -> list[str]:
    out: list[str] = []
    for arg in argv:
        out += arg.split("=", 1) if arg.startswith("--") and "=" in arg else [arg]
    return out
