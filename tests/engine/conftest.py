"""Shared fixtures: tiny random engines (float64, so T=0 ties never flip between paths)."""

from __future__ import annotations

import pytest
import torch

from ddtune.engine.engine import Engine
from ddtune.engine.testing import write_random_checkpoint

# Tiny models run fastest on one thread, and the test machine is shared.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def engines(tmp_path_factory):
    """engines(family, block_size) -> Engine on a vocab-8 random checkpoint (cached)."""
    made: dict[tuple[str, int], Engine] = {}

    def get(family: str = "qwen3", block_size: int = 4) -> Engine:
        key = (family, block_size)
        if key not in made:
            folder = tmp_path_factory.mktemp(f"{family}-b{block_size}")
            target, drafter = write_random_checkpoint(
                folder,
                family=family,
                seed=block_size,
                std=0.3,
                vocab_size=8,
                num_layers=2,
                block_size=block_size,
            )
            made[key] = Engine.load(target, drafter, dtype=torch.float64)
        return made[key]

    return get
