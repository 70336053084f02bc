"""What the torchvision stand-in answers for a name it does not have (test-only workaround).

The PyPI torchvision wheels are CUDA builds: importing one next to the CPU
torch wheel fails ("operator torchvision::nms does not exist"). SGLang imports
`torchvision.transforms` at module level in multimodal modules a text model
never uses, so any name resolves to a class that raises when it is built.
"""

from __future__ import annotations

import enum
from typing import Any


class InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


def missing(module: str, name: str) -> Any:
    """A class named `name` that raises NotImplementedError when built."""
    if name.startswith("__"):
        raise AttributeError(name)

    def refuse(cls: type, *_args: Any, **_kwargs: Any) -> Any:
        raise NotImplementedError(
            f"{module}.{name}: ddtune's torchvision test workaround (no torchvision on this CPU)"
        )

    return type(name, (), {"__new__": refuse, "__module__": module})
