"""torchvision.transforms.v2 stand-in (test-only workaround)."""

from __future__ import annotations

from typing import Any

from torchvision._missing import InterpolationMode, missing
from torchvision.transforms.v2 import functional

__all__ = ["InterpolationMode", "functional"]


def __getattr__(name: str) -> Any:
    return missing(__name__, name)
