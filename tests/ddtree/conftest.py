"""Shared fixtures: tiny random engines (float64, so T=0 ties never flip between paths)."""

from __future__ import annotations

import pytest
import torch

# Tiny models run fastest on one thread, and the test machine is shared.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def engines(random_engines):
    """engines(family, block_size) -> Engine on a vocab-8 random checkpoint (cached)."""
    return lambda family="qwen3", block_size=4: random_engines(family, block_size)[2]
