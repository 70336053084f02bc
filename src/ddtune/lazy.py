"""Lazy package faces (PEP 562): a name is imported from its module on first use.

A face whose modules need torch or optuna uses this, so that `ddtune --help`,
a spec check or the server's startup checks never pay for them:

    __getattr__ = lazy_names(__name__, {"Engine": "engine"})   # ddtune.ddtree.engine.Engine

Static tools see the same names through the face's `if TYPE_CHECKING:` imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` that finds `name` in `package.<names[name]>`."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{names[name]}"), name)

    return __getattr__


__all__ = ["lazy_names"]
