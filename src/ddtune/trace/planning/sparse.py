"""A checkpoint of any size whose data is holes: real config and safetensors headers, sparse files.

    folder = write_sparse_checkpoint(path, qwen3_like(hidden=1024, layers=28, vocab=151936))

What a plan (`trace.planning.plan`) and a fingerprint (`ddtune.fingerprint`) read of a
checkpoint is its config and its shard headers; the data is never read (the
fingerprint samples a few KB of it: zeros here). So a 1T-parameter folder costs
no disk. For tests and benchmarks: nothing can load these weights.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "I8": 1, "U8": 1, "I32": 4}
Tensors = list[tuple[str, str, list[int]]]  # (name, dtype, shape)


def write_sparse_checkpoint(
    folder: Path, config: dict[str, Any], tensors: Tensors, shard_bytes: float = 5e9
) -> Path:
    """`config.json`, an index and shards of about `shard_bytes` each (sparse)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    shards: list[Tensors] = [[]]
    size = 0
    for tensor in tensors:
        nbytes = _nbytes(tensor)
        if shards[-1] and size + nbytes > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(tensor)
        size += nbytes
    weight_map = {}
    for i, group in enumerate(shards, start=1):
        name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        _write_shard(folder / name, group)
        weight_map.update({t[0]: name for t in group})
    index = {"metadata": {"total_size": sum(map(_nbytes, tensors))}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


def _nbytes(tensor: tuple[str, str, list[int]]) -> int:
    _, dtype, shape = tensor
    n = BYTES[dtype]
    for dim in shape:
        n *= dim
    return n


def _write_shard(path: Path, tensors: Tensors) -> None:
    header: dict[str, Any] = {}
    offset = 0
    for tensor in tensors:
        name, dtype, shape = tensor
        header[name] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [offset, offset + _nbytes(tensor)],
        }
        offset += _nbytes(tensor)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with path.open("wb") as out:
        out.write(struct.pack("<Q", len(text)) + text)
        out.truncate(8 + len(text) + offset)


def dense_tensors(config: dict[str, Any], dtype: str = "BF16") -> Tensors:
    """A Qwen3/Llama-shaped decoder's tensors for `config`."""
    h, inter, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    d = config.get("head_dim") or h // heads
    out: Tensors = [("model.embed_tokens.weight", dtype, [vocab, h])]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [
            (p + "self_attn.q_proj.weight", dtype, [heads * d, h]),
            (p + "self_attn.k_proj.weight", dtype, [kv * d, h]),
            (p + "self_attn.v_proj.weight", dtype, [kv * d, h]),
            (p + "self_attn.o_proj.weight", dtype, [h, heads * d]),
            (p + "mlp.gate_proj.weight", dtype, [inter, h]),
            (p + "mlp.up_proj.weight", dtype, [inter, h]),
            (p + "mlp.down_proj.weight", dtype, [h, inter]),
            (p + "input_layernorm.weight", dtype, [h]),
            (p + "post_attention_layernorm.weight", dtype, [h]),
        ]
    out += [("model.norm.weight", dtype, [h])]
    if not config.get("tie_word_embeddings"):
        out += [("lm_head.weight", dtype, [vocab, h])]
    return out


def moe_tensors(config: dict[str, Any], expert_dtype: str = "F8_E4M3") -> Tensors:
    """A DeepSeek-V3/Kimi-K2-shaped MoE (MLA attention, routed + shared experts) for `config`."""
    h, vocab = config["hidden_size"], config["vocab_size"]
    inter, moe = config["intermediate_size"], config["moe_intermediate_size"]
    heads, rank, q_rank = (
        config["num_attention_heads"],
        config["kv_lora_rank"],
        config["q_lora_rank"],
    )
    nope, rope, v = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"]
    out: Tensors = [("model.embed_tokens.weight", "BF16", [vocab, h])]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [
            (p + "self_attn.q_a_proj.weight", "BF16", [q_rank, h]),
            (p + "self_attn.q_b_proj.weight", "BF16", [heads * (nope + rope), q_rank]),
            (p + "self_attn.kv_a_proj_with_mqa.weight", "BF16", [rank + rope, h]),
            (p + "self_attn.kv_b_proj.weight", "BF16", [heads * (nope + v), rank]),
            (p + "self_attn.o_proj.weight", "BF16", [h, heads * v]),
        ]
        if i < config.get("first_k_dense_replace", 0):
            out += [(p + f"mlp.{n}.weight", "BF16", s) for n, s in _mlp(h, inter)]
            continue
        for e in range(config["n_routed_experts"]):
            out += [(p + f"mlp.experts.{e}.{n}.weight", expert_dtype, s) for n, s in _mlp(h, moe)]
        shared = moe * config.get("n_shared_experts", 1)
        out += [(p + f"mlp.shared_experts.{n}.weight", "BF16", s) for n, s in _mlp(h, shared)]
        out += [(p + "mlp.gate.weight", "BF16", [config["n_routed_experts"], h])]
    return out + [("model.norm.weight", "BF16", [h]), ("lm_head.weight", "BF16", [vocab, h])]


def _mlp(h: int, inter: int) -> list[tuple[str, list[int]]]:
    return [("gate_proj", [inter, h]), ("up_proj", [inter, h]), ("down_proj", [h, inter])]


__all__ = ["dense_tensors", "moe_tensors", "write_sparse_checkpoint"]
