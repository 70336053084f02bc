"""The model folders a service command (or systemd unit) loads, as ddtune reads them."""

from __future__ import annotations

import json

import pytest

from ddtune.params import DecodeParams
from ddtune.services.models import served_models, unit_exec_start
from ddtune.services.spec import ServiceSpec

AR = DecodeParams("ar")


def served(tmp_path, **table):
    return served_models(ServiceSpec.from_dict(table), AR, None, tmp_path)


@pytest.mark.parametrize(
    "profile, command, target, drafter",
    [
        (
            "vllm",
            [
                "/opt/v/bin/vllm",
                "serve",
                "/m/Qwen3-8B",
                "--speculative-config",
                json.dumps({"method": "dflash", "model": "/m/Qwen3-8B-DFlash"})
                .replace("{", "{{")
                .replace("}", "}}"),
            ],
            "/m/Qwen3-8B",
            "/m/Qwen3-8B-DFlash",
        ),
        (
            "vllm",
            [
                "python",
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model=/m/t",
                "--speculative-config",
                '{{"method": "ngram", "num_speculative_tokens": 4}}',
            ],
            "/m/t",
            None,
        ),
        (
            "sglang",
            [
                "python",
                "-m",
                "sglang.launch_server",
                "--model-path",
                "/m/k2",
                "--speculative-draft-model-path",
                "/m/k2-dflash",
                "--trust-remote-code",
            ],
            "/m/k2",
            "/m/k2-dflash",
        ),
        (
            "sglang",
            [
                "python",
                "-m",
                "ddtune.launchers",
                "sglang",
                "--model-path",
                "{model}",
                "--draft-model-path",
                "{drafter}",
                "--",
                "--trust-remote-code",
            ],
            "/models/K",
            "/models/K-DFlash",
        ),
        (
            "ddtune",
            ["python", "-m", "ddtune.cli", "serve", "--target", "/a/t", "--drafter", "/a/d"],
            "/a/t",
            "/a/d",
        ),
    ],
)
def test_model_paths_as_each_engine_names_them(tmp_path, profile, command, target, drafter):
    vars_ = {"model": "/models/K", "drafter": "/models/K-DFlash"}
    found = served(tmp_path, engine=profile, command=command, vars=vars_)
    assert str(found.target) == target
    assert (None if found.drafter is None else str(found.drafter)) == drafter
    assert found.trust_remote_code == ("--trust-remote-code" in command)


def test_ddtune_serve_without_folders_loads_the_bundled_models(tmp_path):
    from ddtune import assets

    found = served(tmp_path, command=["ddtune", "serve", "--port", "{port}"])
    assert found.target == assets.default_target_dir()
    assert found.drafter == assets.default_drafter_dir()


def test_relative_paths_are_the_services_and_hub_ids_stay(tmp_path):
    (tmp_path / "models" / "t").mkdir(parents=True)
    found = served(
        tmp_path,
        engine="vllm",
        command=["vllm", "serve", "models/t", "--speculative-model", "org/drafter"],
    )
    assert found.target == tmp_path / "models" / "t"
    assert str(found.drafter) == "org/drafter"


def test_a_systemd_unit_without_a_command_is_read_from_its_exec_start(tmp_path):
    unit = tmp_path / "k2.service"
    unit.write_text(
        "[Unit]\nDescription=x\n[Service]\nExecStart=-/opt/sglang/bin/python -m "
        "sglang.launch_server \\\n  --model-path /m/k2 --speculative-draft-model-path "
        '"/m/k 2 draft"\nRestart=always\n'
    )
    found = served(
        tmp_path, control="systemd", unit="k2.service", systemd_dir=str(tmp_path), engine="sglang"
    )
    assert (str(found.target), str(found.drafter)) == ("/m/k2", "/m/k 2 draft")
    assert str(unit) in found.source
    assert unit_exec_start(tmp_path / "absent.service") == []


@pytest.mark.parametrize(
    ("engine", "flags", "checkpoint", "dtype"),
    [
        ("sglang", [], "bfloat16", "bfloat16"),  # SGLang's "auto": the checkpoint's own
        ("vllm", ["--dtype", "auto"], "float16", "float16"),
        ("vllm", ["--dtype", "half"], "bfloat16", "float16"),  # vLLM's own word
        ("sglang", ["--dtype", "float32"], "bfloat16", "float32"),
        ("ddtune", [], "bfloat16", "float32"),  # ddtune serve computes in float32
        ("openai", [], "bfloat16", None),  # a generic server: unknown
    ],
)
def test_the_dtype_a_command_serves_is_what_a_trace_records_in(
    tmp_path, engine, flags, checkpoint, dtype
):
    """`trace record --spec` records in the served dtype: a greedy path of another dtype
    can leave the served one at near-ties."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"torch_dtype": checkpoint}))
    command = ["python", "-m", "server", "--model-path", str(model), "--model", str(model), *flags]
    table = {"engine": engine, "command": command, "port": 8000}
    if engine == "openai":
        table["model"] = "m"
    assert served(tmp_path, **table).dtype == dtype
