"""Shared fixtures for the training tests: a tiny tokenizer and a tiny trained target."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddtune.train.corpus import sample_documents
from ddtune.train.target import TargetTrainConfig, train_target
from ddtune.train.tokenizer import save_tokenizer, train_tokenizer


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 400-token BPE learned from 300 corpus documents."""
    folder = tmp_path_factory.mktemp("tok")
    save_tokenizer(train_tokenizer(sample_documents(0, 300), vocab_size=400), folder)
    return folder


def tiny_target_config(tok_dir: Path, root: Path, steps: int = 8, **overrides) -> TargetTrainConfig:
    values = dict(
        tokenizer_dir=str(tok_dir),
        out_dir=str(root / "target"),
        checkpoint_dir=str(root / "ckpt"),
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=64,
        max_context=64,
        seq_len=32,
        batch_size=2,
        steps=steps,
        lr=3e-3,
        warmup=2,
        checkpoint_every=4,
        threads=1,
    )
    values.update(overrides)
    return TargetTrainConfig(**values)


@pytest.fixture(scope="session")
def tiny_config():
    """Factory for tiny target training configs (tests call it with their own folders)."""
    return tiny_target_config


@pytest.fixture(scope="session")
def tiny_target_dir(tiny_tokenizer_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny target trained for 8 steps (seconds), saved in Hugging Face format."""
    root = tmp_path_factory.mktemp("tiny_target")
    train_target(tiny_target_config(tiny_tokenizer_dir, root))
    return root / "target"
