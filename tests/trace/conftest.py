"""Shared fixtures: the trace sides of tiny random float64 engines (T=0 ties never flip)."""

from __future__ import annotations

import pytest
import torch

from ddtune.trace.record import OwnTarget

torch.set_num_threads(1)  # tiny models run fastest on one thread; the machine is shared


@pytest.fixture(scope="session")
def sides(random_engines):
    """sides(family, block_size) -> OwnTarget over a vocab-8 random float64 engine with a
    48-token context (cached)."""
    return lambda family="qwen3", block_size=4: OwnTarget(*random_engines(family, block_size, 48))
