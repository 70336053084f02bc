"""DFlash drafter training: block construction, no peeking past the anchor, a tiny run that learns."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from ddtune.ddtree.models.config import DrafterConfig, ModelConfig
from ddtune.ddtree.models.loading import load_decoder, load_drafter
from ddtune.errors import UserError
from ddtune.train.configs import build
from ddtune.train.distill import Example
from ddtune.train.drafter import (
    DrafterTrainConfig,
    block_hidden,
    block_mask,
    drafter_config,
    load_frozen_target,
    make_blocks,
    spread_layer_ids,
    train_drafter,
)

MASK = 1


def _examples() -> list[Example]:
    return [Example(list(range(10, 40)), prompt_len=12), Example(list(range(50, 70)), prompt_len=5)]


def test_blocks_hold_anchor_then_masks_and_shifted_labels() -> None:
    batch = make_blocks(_examples(), anchors=4, block=5, mask_id=MASK, rng=random.Random(0))
    ids, anchor, labels, block_ids = (
        batch["ids"],
        batch["anchor"],
        batch["labels"],
        batch["block_ids"],
    )
    assert block_ids.shape == labels.shape == (2, 4, 5)
    for i, ex in enumerate(_examples()):
        for j in range(4):
            a = int(anchor[i, j])
            assert ex.prompt_len - 1 <= a < len(ex.ids) - 1  # anchors in the generated part
            assert block_ids[i, j, 0] == ids[i, a] and (block_ids[i, j, 1:] == MASK).all()
            assert labels[i, j, 0] == -100
            for k in range(1, 5):
                want = ex.ids[a + k] if a + k < len(ex.ids) else -100
                assert labels[i, j, k] == want


def test_mask_sees_context_before_anchor_and_own_block_only() -> None:
    anchor = torch.tensor([[3, 7]])
    mask = block_mask(anchor, length=10, block=4)  # [1, 8, 10 + 8]
    assert mask.shape == (1, 8, 18)
    for q in range(8):
        j = q // 4
        a = int(anchor[0, j])
        assert mask[0, q, :10].tolist() == [c < a for c in range(10)]
        assert mask[0, q, 10:].tolist() == [c // 4 == j for c in range(8)]


def test_block_output_ignores_tokens_at_and_after_its_anchor(tiny_target_dir: Path) -> None:
    target, _, mask_id = load_frozen_target(tiny_target_dir)
    cfg = drafter_config(
        DrafterTrainConfig("t", "o", "c", intermediate_size=64), target.cfg, mask_id
    )
    torch.manual_seed(0)
    from ddtune.ddtree.models.drafter import DFlashDrafter

    drafter = DFlashDrafter(cfg).eval()
    ex = Example(list(range(20, 60)), prompt_len=4)
    batch = make_blocks(
        [ex], anchors=1, block=cfg.block_size, mask_id=mask_id, rng=random.Random(1)
    )
    a = int(batch["anchor"][0, 0])
    base = block_hidden(drafter, target, batch)
    later = {**batch, "ids": batch["ids"].clone()}
    later["ids"][0, a + 1 :] = 5  # the tokens the block must predict
    torch.testing.assert_close(block_hidden(drafter, target, later), base, rtol=0, atol=1e-5)
    earlier = {**batch, "ids": batch["ids"].clone()}
    earlier["ids"][0, a - 1] = 5  # context before the anchor does matter
    assert not torch.allclose(block_hidden(drafter, target, earlier), base, atol=1e-4)


def test_layer_ids_spread_over_the_target() -> None:
    assert spread_layer_ids(6) == [1, 3, 5]
    assert spread_layer_ids(36, 5) == [1, 10, 18, 26, 35]
    assert spread_layer_ids(2) == [0, 1]


def _tiny(tiny_target_dir: Path, root: Path, **kw) -> DrafterTrainConfig:
    values = dict(
        num_layers=1,
        block_size=4,
        intermediate_size=64,
        prompts=24,
        gen_tokens=12,
        anchors=4,
        batch_size=4,
        steps=30,
        lr=3e-3,
        warmup=2,
        checkpoint_every=5,
        threads=1,
    )
    values.update(kw)
    return DrafterTrainConfig(
        str(tiny_target_dir), str(root / "drafter"), str(root / "ckpt"), **values
    )


def test_tiny_run_learns_and_loads_in_the_engine(tiny_target_dir: Path, tmp_path: Path) -> None:
    first = train_drafter(_tiny(tiny_target_dir, tmp_path / "one", steps=1))
    last = train_drafter(_tiny(tiny_target_dir, tmp_path / "many", steps=40))
    assert last["final_loss"] < first["final_loss"] - 0.3
    drafter = load_drafter(tmp_path / "many" / "drafter")
    target = load_decoder(tiny_target_dir)
    assert isinstance(drafter.cfg, DrafterConfig) and isinstance(target.cfg, ModelConfig)
    drafter.cfg.check_target(target.cfg)
    assert drafter.cfg.mask_token_id == 1 and drafter.cfg.block_size == 4


def test_resume_reproduces_an_uninterrupted_run(tiny_target_dir: Path, tmp_path: Path) -> None:
    train_drafter(_tiny(tiny_target_dir, tmp_path / "a", steps=8))
    part = _tiny(tiny_target_dir, tmp_path / "b", steps=8, checkpoint_every=2)
    assert train_drafter(part, stop_after=5)["stopped_at"] == 5
    train_drafter(part, resume=True)
    a = load_drafter(tmp_path / "a" / "drafter").state_dict()
    b = load_drafter(tmp_path / "b" / "drafter").state_dict()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=1e-6, msg=name)
    with pytest.raises(UserError, match="different settings"):
        train_drafter(_tiny(tiny_target_dir, tmp_path / "b", steps=8, gamma=2.0), resume=True)


def test_bad_config_is_a_clear_error() -> None:
    with pytest.raises(UserError, match="block_size: must be greater than or equal to 2") as caught:
        build(
            DrafterTrainConfig,
            {"target_dir": "t", "out_dir": "o", "checkpoint_dir": "c", "block_size": 1},
        )
    assert caught.value.key == "block_size"
