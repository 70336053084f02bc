"""`ddtune trace record|predict|landscape` as a user runs them (in process, a random checkpoint)."""

from __future__ import annotations

import json

import pytest

from ddtune.cli import main
from ddtune.ddtree.testing import write_random_checkpoint


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trace-cli")
    return write_random_checkpoint(folder, seed=2, std=0.3, vocab_size=12, block_size=4)


def record(models, out, *extra):
    target, drafter = models
    return main(
        [
            "trace",
            "record",
            "--target",
            str(target),
            "--drafter",
            str(drafter),
            "--out",
            str(out),
            "--max-tokens",
            "12",
            *extra,
        ]
    )


def test_record_then_predict_json_and_landscape(models, tmp_path, capsys):
    out = tmp_path / "trace"
    assert (
        record(
            models,
            out,
            "--prompt",
            "eat",
            "--prompt",
            "a toe",
            "--window",
            "none",
            "--window",
            "2",
            "--topk-max",
            "3",
        )
        == 0
    )
    assert "per 1,000 tokens" in capsys.readouterr().out
    assert (
        main(
            [
                "trace",
                "predict",
                str(out),
                "--budget",
                "6",
                "--topk",
                "2",
                "--window",
                "2",
                "--json",
            ]
        )
        == 0
    )
    got = json.loads(capsys.readouterr().out)
    assert set(got) >= {"mean_acceptance_length", "prompts"} and len(got["prompts"]) == 2
    lengths = [n for p in got["prompts"] for n in p["acceptance_lengths"]]
    assert got["mean_acceptance_length"] == pytest.approx(sum(lengths) / len(lengths))
    assert all(1 <= n <= 4 for n in lengths)
    assert main(["trace", "landscape", str(out), "--budgets", "2,4", "--topks", "1,3"]) == 0
    text = capsys.readouterr().out
    assert "window none" in text and "window 2" in text and "dflash chain" in text
    assert (out / "landscape.png").stat().st_size > 1000
    assert len(json.loads((out / "landscape.json").read_text())["ddtree"]) == 2 * 2 * 2


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "give exactly one of --prompt, --prompts-file, --spec, --store"),
        (["--prompt", "eat", "--spec", "x.toml"], "give exactly one of"),
        (["--prompt", "eat", "--query-length", "9"], "does not fit the drafter's block of 4"),
        (["--prompt", "eat", "--max-tokens", "0"], "--max-tokens must be at least 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(models, tmp_path, capsys, args, message):
    assert record(models, tmp_path / "t", *args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_predicting_past_what_was_recorded_is_exit_2(models, tmp_path, capsys):
    out = tmp_path / "trace"
    assert record(models, out, "--prompt", "eat", "--topk-max", "2") == 0
    capsys.readouterr()
    assert main(["trace", "predict", str(out), "--topk", "3"]) == 2
    assert "above the trace's K = 2; record it with --topk-max 3" in capsys.readouterr().err


SPEC = """
[sweep]
name = "p"
strategy = "predict"
trace = "{trace}"
baseline = {{ mode = "ar" }}
[[configs]]
mode = "ddtree"
budget = 4
topk = 2
[service]
control = "process"
command = ["{{python}}", "-m", "ddtune.cli", "serve", "--port", "{{port}}", "--target", "{target}",
           "--drafter", "{drafter}", "--mode", "{{mode}}", "--budget", "{{budget}}",
           "--topk", "{{topk}}"]
port = 18799
[bench]
temperature = 0
prompts_file = "{prompts}"
[bench.short]
n_prompts = 1
max_tokens = 8
[bench.long]
n_prompts = 1
max_tokens = 8
[bench.coding]
enabled = false
"""


def test_a_sweep_refuses_a_trace_of_other_models_or_requests(models, tmp_path, capsys):
    target, drafter = models
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "eat a toe"}\n{"prompt": "tie a", "workload": "long"}\n')
    spec = tmp_path / "p.toml"
    trace = tmp_path / "trace"
    spec.write_text(SPEC.format(trace=trace, target=target, drafter=drafter, prompts=prompts))
    assert (
        main(
            [
                "trace",
                "record",
                "--spec",
                str(spec),
                "--out",
                str(trace),
                "--target",
                str(target),
                "--drafter",
                str(drafter),
            ]
        )
        == 0
    )
    assert main(["sweep", "plan", str(spec)]) == 0
    assert "ddtree b4 k2 wnone" in capsys.readouterr().out
    other, _ = write_random_checkpoint(
        tmp_path / "other", seed=9, std=0.3, vocab_size=12, block_size=4
    )
    spec.write_text(SPEC.format(trace=trace, target=other, drafter=drafter, prompts=prompts))
    assert main(["sweep", "plan", str(spec)]) == 2
    err = capsys.readouterr().err
    assert f"was recorded with the target {target} (fingerprint" in err
    assert f"but the service loads {other} (fingerprint" in err
    prompts.write_text('{"prompt": "a tie"}\n{"prompt": "tie a", "workload": "long"}\n')
    spec.write_text(SPEC.format(trace=trace, target=target, drafter=drafter, prompts=prompts))
    assert main(["sweep", "plan", str(spec)]) == 2
    assert "recorded for other requests" in capsys.readouterr().err


def _spec(tmp_path, models, target=None, drafter=None, trace=None):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "eat a toe"}\n{"prompt": "tie a", "workload": "long"}\n')
    spec = tmp_path / "p.toml"
    spec.write_text(
        SPEC.format(
            trace=trace or tmp_path / "trace",
            target=target or models[0],
            drafter=drafter or models[1],
            prompts=prompts,
        )
    )
    return spec


def test_record_with_a_spec_traces_the_services_own_models(models, tmp_path, capsys):
    from ddtune.trace.files import read_header

    spec, out = _spec(tmp_path, models), tmp_path / "trace"
    assert main(["trace", "record", "--spec", str(spec), "--out", str(out)]) == 0
    header = read_header(out)
    assert (header.target.path, header.drafter.path) == (str(models[0]), str(models[1]))
    assert header.target.fingerprint and header.drafter.fingerprint


def test_record_with_a_spec_never_falls_back_to_a_default(models, tmp_path, capsys):
    spec = _spec(tmp_path, models, target=tmp_path / "elsewhere" / "Kimi-K2")
    assert main(["trace", "record", "--spec", str(spec), "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert "Kimi-K2, which is not a folder on this machine; pass --target DIR" in err
    other, _ = write_random_checkpoint(tmp_path / "o", seed=9, std=0.3, vocab_size=12)
    spec = _spec(tmp_path, models)
    argv = ["trace", "record", "--spec", str(spec), "--out", str(tmp_path / "t")]
    assert main([*argv, "--target", str(other)]) == 2
    err = capsys.readouterr().err
    assert f"--target {other} (fingerprint" in err and f"loads, {models[0]} (fingerprint" in err


def test_a_service_whose_models_cannot_be_read_here_is_said_so(models, tmp_path, capsys):
    spec, out = _spec(tmp_path, models), tmp_path / "trace"
    assert main(["trace", "record", "--spec", str(spec), "--out", str(out)]) == 0
    _spec(tmp_path, models, target="/remote/Kimi-K2")
    hooks = (
        'control = "hooks"\nhooks = { start = "ssh gpu-host start", stop = "ssh gpu-host stop" }'
    )
    spec.write_text(spec.read_text().replace('control = "process"', hooks))  # runs elsewhere
    capsys.readouterr()
    assert main(["sweep", "plan", str(spec)]) == 0
    out_text = capsys.readouterr().out
    assert "the service's target cannot be read here (/remote/Kimi-K2 is not a folder" in out_text
    assert "checked against the model the service reports at its first READY" in out_text


def test_a_sweep_run_refuses_a_trace_of_other_models_before_any_start(models, tmp_path, capsys):
    spec, out = _spec(tmp_path, models), tmp_path / "trace"
    assert main(["trace", "record", "--spec", str(spec), "--out", str(out)]) == 0
    other, _ = write_random_checkpoint(tmp_path / "o", seed=9, std=0.3, vocab_size=12)
    marker = tmp_path / "started"
    text = _spec(tmp_path, models, target=other).read_text()
    starts = f'command = ["{{python}}", "-c", "open({str(marker)!r}, \'w\')", "--target",'
    spec.write_text(
        text.replace(
            'command = ["{python}", "-m", "ddtune.cli", "serve", "--port", "{port}", "--target",',
            starts,
        )
    )
    assert starts in spec.read_text()
    capsys.readouterr()
    assert main(["sweep", "run", str(spec), "--store", str(tmp_path / "s.sqlite")]) == 2
    assert f"but the service loads {other}" in capsys.readouterr().err
    assert not marker.exists()  # 0 service starts


SGLANG_SPEC = """
[sweep]
name = "p"
strategy = "predict"
trace = "{trace}"
baseline = {{ mode = "ar" }}
[[configs]]
method = "ddtree"
budget = 4
topk = 2
drafter = "{drafter}"
[service]
control = "process"
engine = "sglang"
command = ["python", "-m", "sglang.launch_server", "--model-path", "{target}", "--port",
           "{{port}}", "{{method_args}}"]
port = 18799
""" + SPEC[SPEC.index("[bench]") :]


def test_record_with_an_sglang_spec_records_in_the_dtype_it_serves(models, tmp_path, capsys):
    """SGLang serves a checkpoint in its own `torch_dtype` ("auto"): a bfloat16 one is traced
    in bfloat16, not in ddtune's float32 (whose greedy path can differ at near-ties)."""
    import json
    import shutil

    from ddtune.trace.files import read_header

    target = tmp_path / "bf16-target"
    shutil.copytree(models[0], target)
    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, "torch_dtype": "bfloat16"}))
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "eat a toe"}\n{"prompt": "tie a", "workload": "long"}\n')
    out, spec = tmp_path / "trace", tmp_path / "s.toml"
    spec.write_text(
        SGLANG_SPEC.format(trace=out, target=target, drafter=models[1], prompts=prompts)
    )
    assert main(["trace", "record", "--spec", str(spec), "--out", str(out)]) == 0
    assert "recording in bfloat16: the dtype the spec's service serves" in capsys.readouterr().out
    assert read_header(out).dtype == "bfloat16"


VLLM_DFLASH_SPEC = (
    SPEC[: SPEC.index("[[configs]]")]
    + """{configs}
[service]
control = "process"
engine = "vllm"
command = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "{target}",
           "--port", "{{port}}", "{{method_args}}"]
port = 18799
"""
    + SPEC[SPEC.index("[bench]") :]
)


def _dflash_spec(tmp_path, models, blocks):
    """A vLLM DFlash spec whose configs set these block sizes (None: the drafter's own)."""
    configs = "".join(
        f'[[configs]]\nmethod = "dflash"\ndrafter = "{models[1]}"\n'
        + (f"block_size = {b}\n" if b is not None else "")
        for b in blocks
    )
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "eat a toe"}\n{"prompt": "tie a", "workload": "long"}\n')
    spec = tmp_path / "dflash.toml"
    text = VLLM_DFLASH_SPEC.format(
        trace=tmp_path / "trace", configs=configs, target=models[0], prompts=prompts
    )
    spec.write_text(text)
    return spec


def test_each_dflash_block_size_is_traced_and_predicted_at_its_own_length(models, tmp_path):
    """vLLM's DFlash with K draft tokens runs K + 1 drafter queries a round: a spec sweeping
    `block_size` records a view per block size, and each config is predicted from its own
    (not every one from the drafter's full block)."""
    from ddtune.engines import get_engine
    from ddtune.params import DecodeParams
    from ddtune.sweep.plan import read_spec
    from ddtune.sweep.plan.predictions import spec_forecast
    from ddtune.trace.files import read_header
    from ddtune.trace.predict import Trace

    spec = _dflash_spec(tmp_path, models, [2, 3])
    assert main(["trace", "record", "--spec", str(spec), "--out", str(tmp_path / "trace")]) == 0
    header = read_header(tmp_path / "trace")
    assert header.query_lengths == (2, 3) and header.capture == "pre-norm"
    forecast, trace, vllm = (
        spec_forecast(read_spec(spec)),
        Trace.read(tmp_path / "trace"),
        get_engine("vllm"),
    )
    for block in (2, 3):
        label = f"dflash wnone block_size={block}"
        own = trace.predict(DecodeParams("dflash"), vllm, block).acceptance(vllm)
        assert forecast.acceptance[label] == own
        assert {s.verify_tokens for s in forecast.shapes[label].values()} == {block}
    argv = ["trace", "record", "--spec", str(spec), "--out", str(tmp_path / "q3")]
    assert main([*argv, "--query-length", "3"]) == 0
    assert read_header(tmp_path / "q3").query_lengths == (3,)  # as given
