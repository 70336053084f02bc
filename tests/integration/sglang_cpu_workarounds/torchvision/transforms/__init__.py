"""torchvision.transforms stand-in (test-only workaround)."""

from __future__ import annotations

from typing import Any

from torchvision._missing import InterpolationMode, missing
from torchvision.transforms import functional, v2

__all__ = ["InterpolationMode", "functional", "v2"]


def __getattr__(name: str) -> Any:
    return missing(__name__, name)
