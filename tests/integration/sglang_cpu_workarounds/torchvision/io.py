"""torchvision.io stand-in (test-only workaround): the names transformers imports."""

from __future__ import annotations

import enum
from typing import Any

from torchvision._missing import missing


class ImageReadMode(enum.Enum):
    UNCHANGED = 0
    GRAY = 1
    GRAY_ALPHA = 2
    RGB = 3
    RGB_ALPHA = 4
    RGBA = 4  # an alias of RGB_ALPHA, as in torchvision


def __getattr__(name: str) -> Any:
    return missing(__name__, name)
