"""EAGLE-3 head training: aux ids, labels of the unrolled steps, a tiny run that learns,
its saved folder, and a resumed run equal to an uninterrupted one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ddtune.ddtree.models.config import ModelConfig
from ddtune.ddtree.models.loading import load_decoder, load_eagle3
from ddtune.errors import UserError
from ddtune.train.configs import Eagle3TrainConfig, build
from ddtune.train.distill import Example
from ddtune.train.eagle3 import (
    aux_layer_ids,
    head_loss,
    load_frozen,
    make_batch,
    new_head,
    target_features,
    train_eagle3,
)


def test_aux_ids_default_spread_and_checked() -> None:
    assert aux_layer_ids("", 6) == [2, 4, 5]
    assert aux_layer_ids("", 32) == [2, 17, 31]
    assert aux_layer_ids("", 2) == [1, 1, 1]
    assert aux_layer_ids("1, 3,5", 6) == [1, 3, 5]
    with pytest.raises(UserError, match="between 1 and 5"):
        aux_layer_ids("2,4,6", 6)  # 6: the last layer before the final norm
    with pytest.raises(UserError, match="comma-separated"):
        aux_layer_ids("2;4;5", 6)


def test_labels_of_step_k_are_the_token_two_plus_k_ahead_in_the_generated_part() -> None:
    examples = [Example(list(range(10, 22)), prompt_len=5), Example([3, 4, 5, 6], prompt_len=1)]
    index = torch.arange(32)
    index[15] = -1  # token 15 is outside the draft vocabulary
    batch = make_batch(examples, index, steps=3)
    ids, labels = batch["ids"], batch["labels"]
    assert ids.shape == (2, 12) and labels.shape == (3, 2, 12)
    assert ids[1].tolist() == [3, 4, 5, 6] + [0] * 8
    for k in range(3):
        for t in range(12):
            q = t + 2 + k  # the position step k at anchor t predicts
            want = 10 + q if 6 <= q < 12 else -100  # prompt ends at 5; token 15 (at 5): none
            assert labels[k, 0, t] == want, (k, t)
            want = [3, 4, 5, 6][q] if 1 <= q < 4 else -100
            assert labels[k, 1, t] == want, (k, t)


def test_features_are_the_stream_entering_each_layer(tiny_target_dir: Path) -> None:
    target, _ = load_frozen(tiny_target_dir)
    ids = torch.tensor([[5, 6, 7, 8]])
    feats = target_features(target, ids, [1, 1, 1])
    out = target(ids, hidden_layer_ids=[0])  # our decoder's output of layer 0
    assert feats.shape == (1, 4, 3 * target.cfg.hidden_size)
    torch.testing.assert_close(feats[..., : target.cfg.hidden_size], out.hidden[0])
    with pytest.raises(UserError, match="ids 1..1"):
        target_features(target, ids, [0, 1, 2])


def _tiny(tiny_target_dir: Path, root: Path, **kw) -> Eagle3TrainConfig:
    values = dict(
        draft_vocab=200,
        intermediate_size=64,
        ttt_steps=3,
        prompts=16,
        gen_tokens=16,
        batch_size=4,
        steps=30,
        lr=3e-3,
        warmup=2,
        checkpoint_every=5,
        threads=1,
    )
    values.update(kw)
    return Eagle3TrainConfig(str(tiny_target_dir), str(root / "head"), str(root / "ckpt"), **values)


def test_a_tiny_run_lowers_the_loss_and_saves_a_loadable_head(
    tiny_target_dir: Path, tmp_path: Path
) -> None:
    cfg = _tiny(tiny_target_dir, tmp_path)
    summary = train_eagle3(cfg)
    target, tokenizer = load_frozen(tiny_target_dir)
    from ddtune.train.distill import distill_data

    examples = distill_data(cfg, target, tokenizer)  # reloaded from the checkpoint folder
    initial, _ = new_head(cfg, target, examples)
    trained = load_eagle3(tmp_path / "head")
    batch = make_batch(examples[:8], initial.draft_index(), steps=3)
    with torch.no_grad():
        before, guessed = head_loss(initial, target, batch, 0.8)
        after, accuracy = head_loss(trained, target, batch, 0.8)
    assert float(after) < float(before) - 0.5, (float(before), float(after))
    assert accuracy[0] > guessed[0] + 0.05, (guessed, accuracy)
    assert isinstance(target.cfg, ModelConfig)
    trained.cfg.check_target(load_decoder(tiny_target_dir).cfg)
    assert torch.equal(trained.d2t, initial.d2t)  # the vocabulary the run chose, saved
    data = json.loads((tmp_path / "head" / "config.json").read_text())
    assert data["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 1, 1]
    assert data["draft_vocab_size"] == 200 and data["torch_dtype"] == "bfloat16"
    assert summary["draft_vocab"] == 200 and 0 < summary["draft_vocab_coverage"] <= 1
    assert summary["file_bytes"] == (tmp_path / "head" / "model.safetensors").stat().st_size
    assert len(summary["accuracy_per_step"]) == 3


def test_resume_reproduces_an_uninterrupted_run(tiny_target_dir: Path, tmp_path: Path) -> None:
    train_eagle3(_tiny(tiny_target_dir, tmp_path / "a", steps=6))
    part = _tiny(tiny_target_dir, tmp_path / "b", steps=6, checkpoint_every=2)
    assert train_eagle3(part, stop_after=3)["stopped_at"] == 3
    train_eagle3(part, resume=True)
    a = load_eagle3(tmp_path / "a" / "head").state_dict()
    b = load_eagle3(tmp_path / "b" / "head").state_dict()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)
    with pytest.raises(UserError, match="different settings"):
        train_eagle3(_tiny(tiny_target_dir, tmp_path / "b", steps=6, ttt_steps=2), resume=True)


def test_bad_config_is_a_clear_error() -> None:
    with pytest.raises(UserError, match="ttt_steps: must be greater than or equal to 1") as caught:
        build(
            Eagle3TrainConfig,
            {"target_dir": "t", "out_dir": "o", "checkpoint_dir": "c", "ttt_steps": 0},
        )
    assert caught.value.key == "ttt_steps"
