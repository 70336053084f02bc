"""A tiny target run lowers the loss, resumes exactly, and saves a folder both loaders agree on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from ddtune.cli import main
from ddtune.ddtree.models.loading import load_decoder
from ddtune.errors import UserError
from ddtune.train.common import cosine_lr
from ddtune.train.target import token_stream, train_target
from ddtune.train.tokenizer import load_tokenizer


def _loss_on(model_dir: Path, tokens: torch.Tensor) -> float:
    model = load_decoder(model_dir)
    with torch.no_grad():
        logits = model(tokens[None, :-1]).logits[0]
    return F.cross_entropy(logits, tokens[1:]).item()


def test_training_lowers_the_loss_on_seen_text(
    tiny_tokenizer_dir: Path, tiny_config, tmp_path: Path
) -> None:
    cfg = tiny_config(tiny_tokenizer_dir, tmp_path, steps=1)
    one = train_target(cfg)
    cfg = tiny_config(tiny_tokenizer_dir, tmp_path / "long", steps=30)
    many = train_target(cfg)
    stream = token_stream(load_tokenizer(tiny_tokenizer_dir), 0, 0.7, 30 * 2 * 33)
    sample = stream[: 33 * 4]
    assert (
        _loss_on(tmp_path / "long" / "target", sample) < _loss_on(tmp_path / "target", sample) - 0.5
    )
    assert many["final_loss"] < one["final_loss"]
    assert many["tokens"] == 30 * 2 * 32


def test_resume_reproduces_an_uninterrupted_run(
    tiny_tokenizer_dir: Path, tiny_config, tmp_path: Path
) -> None:
    straight = tiny_config(tiny_tokenizer_dir, tmp_path / "a", steps=8)
    train_target(straight)
    # interrupted after step 3 (last checkpoint at step 2), then resumed to 8
    part = tiny_config(tiny_tokenizer_dir, tmp_path / "b", steps=8, checkpoint_every=2)
    assert train_target(part, stop_after=3)["stopped_at"] == 3
    saved = torch.load(Path(part.checkpoint_dir) / "checkpoint.pt", weights_only=False)
    assert saved["step"] == 3 and not (tmp_path / "b" / "target").exists()
    train_target(part, resume=True)
    a = load_decoder(tmp_path / "a" / "target").state_dict()
    b = load_decoder(tmp_path / "b" / "target").state_dict()
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=1e-6, msg=name)


def test_resume_refuses_a_changed_recipe(
    tiny_tokenizer_dir: Path, tiny_config, tmp_path: Path
) -> None:
    train_target(tiny_config(tiny_tokenizer_dir, tmp_path, steps=4))
    with pytest.raises(UserError, match=r"different settings \(lr\)"):
        train_target(tiny_config(tiny_tokenizer_dir, tmp_path, steps=4, lr=1e-2), resume=True)
    with pytest.raises(UserError, match="no checkpoint.pt"):
        train_target(tiny_config(tiny_tokenizer_dir, tmp_path / "new", steps=8), resume=True)


def test_saved_folder_is_complete(tiny_target_dir: Path) -> None:
    names = {p.name for p in tiny_target_dir.iterdir()}
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "generation_config.json",
        "tokenizer_config.json",
    } <= names
    config = json.loads((tiny_target_dir / "config.json").read_text())
    assert config["architectures"] == ["Qwen3ForCausalLM"] and config["eos_token_id"] == 0
    assert json.loads((tiny_target_dir / "generation_config.json").read_text())["eos_token_id"] == 0


def test_cosine_schedule_shape() -> None:
    lrs = [cosine_lr(s, 100, 1.0, 10) for s in range(100)]
    assert lrs[9] == pytest.approx(1.0) and lrs[0] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:], strict=False))
    assert lrs[-1] == pytest.approx(0.1, abs=1e-3)


def test_cli_bad_arguments_are_one_line_errors(
    tiny_tokenizer_dir: Path, tmp_path: Path, capsys
) -> None:
    code = main(
        [
            "train",
            "target",
            "--tokenizer",
            str(tiny_tokenizer_dir),
            "--out",
            str(tmp_path / "o"),
            "--checkpoint-dir",
            str(tmp_path / "c"),
            "--num-heads",
            "3",
        ]
    )
    assert code == 2
    assert "hidden_size must divide by num_heads" in capsys.readouterr().err
    code = main(
        [
            "train",
            "target",
            "--tokenizer",
            str(tmp_path),
            "--out",
            str(tmp_path / "o"),
            "--checkpoint-dir",
            str(tmp_path / "c"),
            "--steps",
            "2",
        ]
    )
    assert code == 2
    assert "no tokenizer.json" in capsys.readouterr().err


def test_second_stage_starts_from_the_first(
    tiny_tokenizer_dir: Path, tiny_target_dir: Path, tiny_config, tmp_path: Path
) -> None:
    # one step at a negligible learning rate: the result is the starting folder's weights
    train_target(
        tiny_config(
            tiny_tokenizer_dir, tmp_path, steps=1, seed=5, lr=1e-12, init_from=str(tiny_target_dir)
        )
    )
    start = load_decoder(tiny_target_dir).state_dict()
    for name, value in load_decoder(tmp_path / "target").state_dict().items():
        torch.testing.assert_close(value, start[name], rtol=0, atol=1e-6, msg=name)
    with pytest.raises(UserError, match="differs from this run's in head_dim, hidden_size"):
        train_target(
            tiny_config(
                tiny_tokenizer_dir,
                tmp_path / "bad",
                steps=1,
                hidden_size=64,
                init_from=str(tiny_target_dir),
            )
        )
