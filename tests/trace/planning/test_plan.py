"""The plan before loading: sizes from headers, memory per device, a refusal that names why."""

from __future__ import annotations

import pytest
from sparse_checkpoint import dense_tensors, moe_tensors, write_sparse_checkpoint

from ddtune.cli import main
from ddtune.errors import UserError
from ddtune.trace.planning.loading import (
    Loading,
    parse_devices,
    parse_max_memory,
    require_transformers,
)
from ddtune.trace.planning.plan import Device, Rates, model_size, parse_bytes, trace_plan

DENSE = {
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}
MOE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 3,
    "first_k_dense_replace": 1,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "num_attention_heads": 4,
    "kv_lora_rank": 16,
    "q_lora_rank": 24,
    "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 4,
    "v_head_dim": 8,
    "vocab_size": 1000,
}


def test_sizes_come_from_the_headers_at_the_load_dtype(tmp_path):
    folder = write_sparse_checkpoint(tmp_path / "d", DENSE, dense_tensors(DENSE, "F32"), 5e8)
    size = model_size(folder, "bfloat16")
    h, i, v, layers = 1024, 3072, 151936, 28
    per_layer = 16 * 128 * h * 2 + 8 * 128 * h * 2 + 3 * i * h + 2 * h
    assert size.params == v * h + layers * per_layer + h == size.active_params
    assert size.load_bytes == 2 * size.params  # F32 on disk, loaded as bf16
    assert size.disk_bytes > 4 * size.params
    assert size.kv_bytes_per_token == 2 * layers * 8 * 128 * 2
    assert len(list(folder.glob("*.safetensors"))) > 1


def test_a_moe_counts_the_routed_experts_a_token_takes(tmp_path):
    folder = write_sparse_checkpoint(tmp_path / "m", MOE, moe_tensors(MOE, "F8_E4M3"))
    size = model_size(folder, "bfloat16")
    expert = 3 * 32 * 64  # one expert's parameters
    experts = 2 * 8 * expert  # two MoE layers of eight
    assert size.params - size.active_params == experts - experts * 2 // 8
    assert size.load_bytes == 2 * size.params - experts  # fp8 experts stay one byte
    assert size.kv_bytes_per_token == 3 * (16 + 4) * 2  # MLA: the latent and the rope key


def plan(tmp_path, devices, longest=4096):
    folder = write_sparse_checkpoint(tmp_path / "d", DENSE, dense_tensors(DENSE), 5e8)
    return trace_plan(
        folder,
        folder,
        "bfloat16",
        longest=longest,
        tokens=10 * longest,
        continuation=1000,
        generated=0,
        views=2,
        query_length=16,
        devices=devices,
        rates=Rates(flops=1e12, bandwidth=1e11, source="given"),
    )


def test_weights_spread_over_the_devices_and_the_work_sits_on_the_first(tmp_path):
    p = plan(tmp_path, [Device("cuda:0", 80e9), Device("cuda:1", 80e9)])
    placed = p.place()
    half = p.target.load_bytes / 2
    assert placed["cuda:1"] == pytest.approx(half)
    assert placed["cuda:0"] == pytest.approx(half + p.activation_bytes() + p.drafter_bytes())
    assert p.refusal() is None
    text = "\n".join(p.lines())
    assert "cuda:0" in text and "per 1,000 traced tokens (given)" in text
    assert p.seconds()["forward"] > 2 * p.target.active_params * p.tokens / 1e12


def test_a_plan_that_cannot_fit_is_refused_naming_the_device(tmp_path):
    p = plan(tmp_path, [Device("cuda:0", 1e9)])
    why = p.refusal()
    assert why is not None and "on cuda:0, which has 1.0 GB free" in why
    assert "--devices" in why and "--offload" in why


def test_loading_follows_the_model_and_the_user(monkeypatch):
    auto = Loading()
    assert auto.dtype_for({"torch_dtype": "float32"}) == "float32"
    assert auto.dtype_for({}) == "bfloat16" == auto.dtype_for({"torch_dtype": "float8"})
    assert auto.dtype_for({"quantization_config": {"quant_method": "fp8"}}) == "auto"
    assert Loading(dtype="float16").dtype_for({"torch_dtype": "float32"}) == "float16"
    with pytest.raises(UserError, match="--dtype must be auto or one of"):
        Loading(dtype="int3")
    two = Loading(
        devices=parse_devices("0,cuda:2"), max_memory=parse_max_memory(["0=70GiB", "cuda:2=60GiB"])
    )
    assert two.placement(4) == {"device_map": "auto", "max_memory": {0: "70GiB", 2: "60GiB"}}
    spill = Loading(devices=("cuda:0",), max_memory={"cuda:0": "10GiB"}, offload=True)
    assert spill.placement(1)["max_memory"] == {0: "10GiB", "cpu": "1000GiB"}
    assert Loading(devices=("cuda:1",)).placement(2) == {"device_map": "cuda:1"}
    assert Loading(device="cpu").placement(8) == {} == Loading().placement(0)
    with pytest.raises(UserError, match="has 2 GPU"):
        Loading(devices=("cuda:3",)).placement(2)
    with pytest.raises(UserError, match="not a GPU"):
        parse_devices("gpu0")
    with pytest.raises(UserError, match="DEVICE=AMOUNT"):
        parse_max_memory(["70GiB"])
    assert parse_bytes("1.5GiB") == 1.5 * 2**30 and parse_bytes("500MB") == 5e8
    with pytest.raises(UserError, match="not an amount"):
        parse_bytes("lots")
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda m: None if m == "accelerate" else real(m)
    )
    require_transformers({})
    with pytest.raises(UserError, match=r"needs accelerate.*pip install 'ddtune\[transformers\]'"):
        require_transformers({"device_map": "auto"})


def test_plan_only_prints_the_plan_and_loads_nothing(tmp_path, capsys):
    out = tmp_path / "trace"
    assert main(["trace", "record", "--prompt", "def f(x):", "--out", str(out), "--plan-only"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("plan: target") and "cpu:" in text and "per 1,000 traced tokens" in text
    assert not out.exists()
    argv = ["trace", "record", "--prompt", "x", "--out", str(out), "--backend", "transformers"]
    assert main([*argv, "--devices", "cpu", "--max-memory", "cpu=1MB"]) == 2
    assert "the trace needs" in capsys.readouterr().err and not out.exists()


def test_on_the_cpu_a_converted_checkpoint_counts_twice_while_loading(tmp_path):
    folder = write_sparse_checkpoint(tmp_path / "f", DENSE, dense_tensors(DENSE, "F32"), 5e8)
    common = dict(longest=64, tokens=64, continuation=32, generated=0, views=1, query_length=16)
    rates = Rates(flops=1e12, bandwidth=1e11)
    cpu = trace_plan(
        folder, folder, "bfloat16", devices=[Device("cpu", 64e9)], rates=rates, **common
    )
    assert cpu.target.converted
    assert (
        cpu.place()["cpu"] == cpu.loading_bytes() == cpu.target.load_bytes + cpu.target.disk_bytes
    )
    same = trace_plan(
        folder, folder, "float32", devices=[Device("cpu", 64e9)], rates=rates, **common
    )
    assert not same.target.converted and same.loading_bytes() == same.target.load_bytes
    gpu = trace_plan(
        folder, folder, "bfloat16", devices=[Device("cuda:0", 80e9)], rates=rates, **common
    )
    assert gpu.place()["cuda:0"] < cpu.loading_bytes()  # GPU memory holds the loaded copy only
