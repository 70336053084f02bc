"""A torchvision functional-transforms stand-in (test-only workaround)."""

from __future__ import annotations

from typing import Any

from torchvision._missing import InterpolationMode, missing

__all__ = ["InterpolationMode"]


def __getattr__(name: str) -> Any:
    return missing(__name__, name)
