"""Shared fixtures: tiny random float64 engines and their trace sides (T=0 ties never flip)."""

from __future__ import annotations

import pytest
import torch

from ddtune.engine.engine import Engine
from ddtune.engine.testing import write_random_checkpoint
from ddtune.trace.record import OwnTarget

torch.set_num_threads(1)  # tiny models run fastest on one thread; the machine is shared


@pytest.fixture(scope="session")
def sides(tmp_path_factory):
    """sides(family, block_size) -> OwnTarget over a vocab-8 random float64 engine (cached)."""
    made: dict[tuple[str, int], OwnTarget] = {}

    def get(family: str = "qwen3", block_size: int = 4) -> OwnTarget:
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
                max_position_embeddings=48,
            )
            engine = Engine.load(target, drafter, dtype=torch.float64)
            made[key] = OwnTarget(target, drafter, engine)
        return made[key]

    return get
