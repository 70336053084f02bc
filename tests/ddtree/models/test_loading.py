"""Loading and saving model folders: single-file and sharded weights, clear errors."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from ddtune.ddtree.models.loading import load_decoder, load_drafter, save_decoder
from ddtune.ddtree.models.tokenizer import Tokenizer
from ddtune.ddtree.testing import write_random_checkpoint
from ddtune.errors import UserError


def test_random_checkpoint_has_public_dflash_layout(tmp_path):
    target_dir, drafter_dir = write_random_checkpoint(tmp_path, num_layers=4, drafter_layers=2)
    names = set(load_file(str(drafter_dir / "model.safetensors")))
    assert {"fc.weight", "hidden_norm.weight", "norm.weight"} <= names
    assert "layers.1.self_attn.k_norm.weight" in names
    assert not any("embed" in n or "lm_head" in n for n in names)
    cfg = json.loads((drafter_dir / "config.json").read_text())
    assert cfg["dflash_config"]["target_layer_ids"] == [0, 2]
    drafter = load_drafter(drafter_dir)
    assert drafter.fc.weight.shape == (64, 2 * 64)
    for f in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json"):
        assert (target_dir / f).is_file()


def test_save_and_reload_gives_same_logits(tmp_path):
    target_dir, _ = write_random_checkpoint(tmp_path / "a", family="llama")
    model = load_decoder(target_dir)
    copy = load_decoder(
        save_decoder(model, model.cfg, tmp_path / "b", target_dir / "tokenizer.json")
    )
    ids = torch.arange(10)[None]
    with torch.no_grad():
        assert torch.equal(model(ids).logits, copy(ids).logits)


def test_sharded_checkpoint_loads(tmp_path):
    target_dir, _ = write_random_checkpoint(tmp_path)
    state = load_file(str(target_dir / "model.safetensors"))
    names = sorted(state)
    half = len(names) // 2
    shards = {
        "model-00001-of-00002.safetensors": names[:half],
        "model-00002-of-00002.safetensors": names[half:],
    }
    for shard, keys in shards.items():
        save_file({k: state[k] for k in keys}, str(target_dir / shard))
    index = {"weight_map": {k: s for s, keys in shards.items() for k in keys}}
    (target_dir / "model.safetensors.index.json").write_text(json.dumps(index))
    reference = load_decoder(target_dir)
    (target_dir / "model.safetensors").unlink()
    sharded = load_decoder(target_dir)
    ids = torch.arange(6)[None]
    with torch.no_grad():
        assert torch.equal(reference(ids).logits, sharded(ids).logits)


def test_missing_weights_file_is_named(tmp_path):
    target_dir, _ = write_random_checkpoint(tmp_path)
    (target_dir / "model.safetensors").unlink()
    with pytest.raises(UserError, match="model.safetensors"):
        load_decoder(target_dir)


def test_missing_weight_is_named(tmp_path):
    target_dir, _ = write_random_checkpoint(tmp_path)
    state = load_file(str(target_dir / "model.safetensors"))
    del state["model.norm.weight"]
    save_file(state, str(target_dir / "model.safetensors"))
    with pytest.raises(UserError, match="model.norm.weight"):
        load_decoder(target_dir)


def test_tokenizer_round_trip_and_missing_file(tmp_path):
    target_dir, _ = write_random_checkpoint(tmp_path)
    tok = Tokenizer.load(target_dir)
    assert tok.decode(tok.encode("def add(a, b):")) == "def add(a, b):"
    (target_dir / "tokenizer.json").unlink()
    with pytest.raises(UserError, match="tokenizer.json"):
        Tokenizer.load(target_dir)
