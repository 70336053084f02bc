"""WORKAROUND (test-only): a stand-in for torchvision (its PyPI wheel is a CUDA build).

NOT the real torchvision; see `_missing.py` and the folder's README.md.
"""

from __future__ import annotations

from typing import Any

from torchvision import io, transforms
from torchvision._missing import missing

__version__ = "0.0.0+ddtune-test-workaround"
IS_DDTUNE_WORKAROUND = True
__all__ = ["io", "transforms"]


def __getattr__(name: str) -> Any:
    return missing(__name__, name)
