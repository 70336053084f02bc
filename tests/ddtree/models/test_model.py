"""Our decoder equals transformers on the same random checkpoint; cache paths equal full passes."""

from __future__ import annotations

import pytest
import torch

from ddtune.ddtree.models.loading import load_decoder
from ddtune.ddtree.models.model import causal_mask
from ddtune.ddtree.testing import LLAMA3_SCALING, write_random_checkpoint

CASES = {
    "qwen3": dict(family="qwen3"),
    "qwen3-tied": dict(family="qwen3", tie_word_embeddings=True),
    "llama": dict(family="llama"),
    "llama3-rope": dict(family="llama", rope_scaling=LLAMA3_SCALING, tie_word_embeddings=True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_logits_and_hidden_states_match_transformers(tmp_path, case):
    transformers = pytest.importorskip("transformers")
    target_dir, _ = write_random_checkpoint(tmp_path, seed=1, num_layers=3, **CASES[case])
    ours = load_decoder(target_dir)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        str(target_dir), dtype=torch.float32, attn_implementation="eager"
    ).eval()
    ids = torch.randint(
        0, ours.cfg.vocab_size, (2, 150), generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        ref = theirs(ids, output_hidden_states=True)
        out = ours(ids, hidden_layer_ids=[0, 1, 2])
    assert (out.logits - ref.logits).abs().max().item() < 1e-4
    for i in range(3):  # DFlash convention: id i is HF hidden_states[i + 1]
        assert (out.hidden[i] - ref.hidden_states[i + 1]).abs().max().item() < 1e-4


def test_incremental_cache_equals_full_forward(tmp_path):
    target_dir, _ = write_random_checkpoint(tmp_path, seed=2)
    model = load_decoder(target_dir)
    ids = torch.randint(
        0, model.cfg.vocab_size, (1, 20), generator=torch.Generator().manual_seed(3)
    )
    with torch.no_grad():
        full = model(ids).logits
        cache = model.new_cache(64)
        parts = [model(ids[:, :13], cache=cache).logits]
        parts += [model(ids[:, t : t + 1], cache=cache).logits for t in range(13, 17)]
        parts.append(model(ids[:, 17:], cache=cache).logits)
    assert cache.length == 20
    assert (torch.cat(parts, dim=1) - full).abs().max().item() < 1e-5


def test_explicit_mask_equals_default_causal_mask(tmp_path):
    target_dir, _ = write_random_checkpoint(tmp_path, seed=4, family="llama")
    model = load_decoder(target_dir)
    ids = torch.randint(0, model.cfg.vocab_size, (1, 9), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        a = model(ids).logits
        b = model(ids, positions=torch.arange(9)[None], attn_mask=causal_mask(0, 9)).logits
    assert (a - b).abs().max().item() < 1e-5


def test_training_forward_has_gradients(tmp_path):
    target_dir, _ = write_random_checkpoint(tmp_path, seed=6)
    model = load_decoder(target_dir).train()
    ids = torch.randint(0, model.cfg.vocab_size, (2, 12))
    out = model(ids)
    loss = torch.nn.functional.cross_entropy(out.logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
    loss.backward()
    grad = model.model.layers[0].self_attn.q_proj.weight.grad
    assert grad is not None and grad.abs().sum().item() > 0
