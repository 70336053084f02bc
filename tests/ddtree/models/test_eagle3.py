"""The EAGLE-3 head: released heads' tensor names, its config.json, the saved layout, and
`unroll` equal to drafting one step at a time (the training-time test's mask and positions)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from ddtune.ddtree.models.config import Eagle3Config, ModelConfig
from ddtune.ddtree.models.eagle3 import Eagle3Head, chain_mask
from ddtune.ddtree.models.loading import load_eagle3, save_eagle3
from ddtune.ddtree.testing import random_configs, randomize
from ddtune.errors import UserError

# The tensors of a released EAGLE-3 head (e.g. yuhuili/EAGLE3-LLaMA3.1-Instruct-8B), which
# vLLM's Eagle3LlamaForCausalLM.load_weights and SGLang's LlamaForCausalLMEagle3 read.
RELEASED_NAMES = {
    "d2t",
    "t2d",
    "fc.weight",
    "midlayer.hidden_norm.weight",
    "midlayer.input_layernorm.weight",
    "midlayer.post_attention_layernorm.weight",
    "midlayer.self_attn.q_proj.weight",
    "midlayer.self_attn.k_proj.weight",
    "midlayer.self_attn.v_proj.weight",
    "midlayer.self_attn.o_proj.weight",
    "midlayer.mlp.gate_proj.weight",
    "midlayer.mlp.up_proj.weight",
    "midlayer.mlp.down_proj.weight",
    "norm.weight",
    "lm_head.weight",
}


def head_config(draft_vocab: int = 48, ids: tuple[int, ...] = (1, 2, 2)) -> Eagle3Config:
    target, _ = random_configs(vocab_size=64, hidden_size=32, num_layers=3, head_dim=8)
    fields = {k: v for k, v in vars(target).items() if k != "family"}
    fields.update(num_hidden_layers=1, draft_vocab_size=draft_vocab, aux_layer_ids=list(ids))
    return Eagle3Config(family="llama", **fields)


def random_head(cfg: Eagle3Config, seed: int = 0) -> Eagle3Head:
    head = Eagle3Head(cfg)
    generator = torch.Generator().manual_seed(seed)
    randomize(head, generator, 0.2)
    chosen = torch.randperm(cfg.vocab_size, generator=generator)[: cfg.draft_vocab_size]
    head.set_vocabulary(chosen.sort().values)
    return head.eval()


def test_weights_carry_the_released_names_and_shapes() -> None:
    cfg = head_config()
    state = Eagle3Head(cfg).state_dict()
    assert set(state) == RELEASED_NAMES
    h, d = cfg.hidden_size, cfg.head_dim
    assert state["fc.weight"].shape == (h, 3 * h)
    assert state["midlayer.self_attn.q_proj.weight"].shape == (cfg.num_attention_heads * d, 2 * h)
    assert state["midlayer.self_attn.k_proj.weight"].shape == (cfg.num_key_value_heads * d, 2 * h)
    assert state["lm_head.weight"].shape == (48, h)
    assert state["d2t"].dtype == torch.long and state["d2t"].shape == (48,)
    assert state["t2d"].dtype == torch.bool and state["t2d"].shape == (64,)


def test_config_json_is_what_vllm_and_sglang_read() -> None:
    data = head_config().to_hf_dict()
    assert data["architectures"] == ["LlamaForCausalLMEagle3"]
    assert data["model_type"] == "llama" and data["num_hidden_layers"] == 1
    assert data["draft_vocab_size"] == 48 and data["vocab_size"] == 64
    assert data["eagle_config"] == {
        "eagle_aux_hidden_state_layer_ids": [1, 2, 2],
        "use_aux_hidden_state": True,
    }
    assert Eagle3Config.from_dict(data) == head_config()


def test_config_without_ids_means_the_engines_default_layers() -> None:
    data = head_config().to_hf_dict()
    del data["eagle_config"]
    cfg = Eagle3Config.from_dict(data)
    assert cfg.aux_layer_ids == [] and cfg.layer_ids(32) == [2, 16, 29]


def test_config_errors_name_the_field() -> None:
    data = head_config().to_hf_dict()
    with pytest.raises(UserError, match="LlamaForCausalLMEagle3"):
        Eagle3Config.from_dict({**data, "architectures": ["LlamaForCausalLM"]})
    with pytest.raises(UserError, match="one layer"):
        Eagle3Config.from_dict({**data, "num_hidden_layers": 2})
    target = ModelConfig.from_dict({**data, "architectures": ["LlamaForCausalLM"]})
    head_config().check_target(replace(target, num_hidden_layers=3))
    with pytest.raises(UserError, match="another target"):
        head_config().check_target(replace(target, hidden_size=48, num_hidden_layers=3))
    with pytest.raises(UserError, match="exceed the target's 1 layers"):
        head_config().check_target(replace(target, num_hidden_layers=1))


def test_vocabulary_maps_draft_ids_to_target_ids() -> None:
    head = Eagle3Head(head_config(draft_vocab=4))
    head.set_vocabulary(torch.tensor([3, 7, 8, 60]))
    assert head.d2t.tolist() == [3, 6, 6, 57]
    assert head.target_ids(torch.tensor([0, 1, 2, 3])).tolist() == [3, 7, 8, 60]
    assert head.t2d.nonzero().flatten().tolist() == [3, 7, 8, 60]
    index = head.draft_index()
    assert index[[3, 7, 8, 60]].tolist() == [0, 1, 2, 3] and index[4] == -1
    with pytest.raises(ValueError, match="ascending"):
        head.set_vocabulary(torch.tensor([3, 3, 8, 60]))
    with pytest.raises(ValueError, match="ascending"):
        head.set_vocabulary(torch.tensor([3, 4, 8, 64]))  # past the target's vocabulary


def test_saved_folder_round_trips_in_bfloat16(tmp_path: Path) -> None:
    cfg = head_config()
    head = random_head(cfg)
    folder = save_eagle3(head, cfg, tmp_path / "head")
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        names = set(f.keys())
        assert f.get_tensor("fc.weight").dtype == torch.bfloat16
        assert f.get_tensor("d2t").dtype == torch.long
    assert names == RELEASED_NAMES
    assert json.loads((folder / "config.json").read_text())["torch_dtype"] == "bfloat16"
    loaded = load_eagle3(folder)
    assert loaded.cfg == replace(cfg, torch_dtype="bfloat16")
    for name, tensor in head.state_dict().items():
        want = tensor.to(torch.bfloat16).float() if tensor.is_floating_point() else tensor
        assert torch.equal(loaded.state_dict()[name], want), name


def test_chain_mask_sees_context_then_its_own_chain() -> None:
    mask = chain_mask(4, 2)
    assert mask.shape == (4, 12)
    assert mask[2, :4].tolist() == [True, True, True, False]  # step 0 at anchors <= 2
    assert mask[2, 4:8].tolist() == [False, False, True, False]  # step 1 at anchor 2 only
    assert mask[2, 8:].tolist() == [False, False, True, False]  # step 2 (itself)


@torch.no_grad()
def draft_one_step_at_a_time(
    head: Eagle3Head, embed: torch.nn.Embedding, ids: torch.Tensor, feats: torch.Tensor, t: int
) -> list[torch.Tensor]:
    """Reference: drafting from anchor t as an engine does it. Step 0 over the context
    (causal), then one step per position t + k, each attending to the context's step-0
    keys at 0..t and the chain's own keys so far; logits per step at the anchor."""
    length = ids.shape[1]
    positions = torch.arange(length)[None]
    tokens = torch.cat([ids[:, 1:], torch.zeros(1, 1, dtype=torch.long)], dim=1)
    causal = torch.ones(length, length, dtype=torch.bool).tril()[None]
    rope = head.rope(head.inv_freq, positions, feats.dtype)
    out, (k0, v0) = head.step(embed(tokens), head.fc(feats), rope, [], causal)
    past = [(k0[:, :, : t + 1], v0[:, :, : t + 1])]
    hidden, logits = out[:, t : t + 1], [head.logits(out[:, t])]
    for k in range(1, 4):
        rope = head.rope(head.inv_freq, torch.tensor([[t + k]]), feats.dtype)
        hidden, kv = head.step(embed(ids[:, t + 1 + k : t + 2 + k]), hidden, rope, past, None)
        past.append(kv)
        logits.append(head.logits(hidden[:, 0]))
    return logits


def test_unroll_equals_drafting_one_step_at_a_time() -> None:
    cfg = head_config()
    head = random_head(cfg)
    embed = torch.nn.Embedding(cfg.vocab_size, cfg.hidden_size)
    torch.nn.init.normal_(embed.weight, std=0.5, generator=torch.Generator().manual_seed(1))
    gen = torch.Generator().manual_seed(2)
    ids = torch.randint(2, cfg.vocab_size, (1, 12), generator=gen)
    feats = torch.randn(1, 12, 3 * cfg.hidden_size, generator=gen)
    with torch.no_grad():
        unrolled = head.unroll(embed, ids, feats, steps=4)
    assert [u.shape for u in unrolled] == [(1, 12, 48)] * 4
    for t in (0, 3, 7):
        reference = draft_one_step_at_a_time(head, embed, ids, feats, t)
        for k in range(4):
            torch.testing.assert_close(unrolled[k][:, t], reference[k], rtol=1e-4, atol=1e-5)
    # and a later token never changes an earlier anchor's chain
    changed = ids.clone()
    changed[0, 10] = (ids[0, 10] + 1) % cfg.vocab_size
    with torch.no_grad():
        again = head.unroll(embed, changed, feats, steps=4)
    torch.testing.assert_close(again[3][:, :6], unrolled[3][:, :6])
    assert not torch.allclose(again[0][:, 9], unrolled[0][:, 9])
