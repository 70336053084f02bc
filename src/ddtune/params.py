"""The decoding-parameter vocabulary shared by engine, server, services and sweep.

One `DecodeParams` names a speculative-decoding configuration the same way
for every engine (see DESIGN.md "Parameters"):

    mode    ar | dflash | ddtree
    budget  tree node budget B (nodes besides the root), ddtree only
    topk    per-depth branching cap K, ddtree only
    window  drafter context window W (None = the whole context)
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from typing import Any

from ddtune.errors import UserError

MODES = ("ar", "dflash", "ddtree")
MAX_BUDGET = 1024
MAX_TOPK = 64


@dataclass(frozen=True)
class DecodeParams:
    mode: str = "ddtree"
    budget: int = 16
    topk: int = 4
    window: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UserError(f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")
        _check_int("budget", self.budget, 0, MAX_BUDGET)
        _check_int("topk", self.topk, 1, MAX_TOPK)
        if self.window is not None:
            _check_int("window", self.window, 1, 1 << 30)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DecodeParams:
        """Strict: unknown keys are an error, `window` accepts "none"."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UserError(
                f"unknown decoding parameter(s) {', '.join(unknown)}; "
                f"expected some of {', '.join(sorted(known))}"
            )
        values = dict(data)
        if "window" in values:
            values["window"] = parse_window(values["window"])
        return cls(**values)

    def with_updates(self, updates: dict[str, Any]) -> DecodeParams:
        return DecodeParams.from_dict({**self.to_dict(), **updates})

    def canonical(self) -> DecodeParams:
        """Drop the parameters a mode ignores, so equal behaviour hashes equal."""
        if self.mode == "ar":
            return DecodeParams("ar", 0, 1, None)
        if self.mode == "dflash":
            return DecodeParams("dflash", 0, 1, self.window)
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def label(self) -> str:
        """Short human label, e.g. `ddtree b16 k4 wnone` or `ar`."""
        if self.mode == "ar":
            return "ar"
        w = "none" if self.window is None else str(self.window)
        if self.mode == "dflash":
            return f"dflash w{w}"
        return f"ddtree b{self.budget} k{self.topk} w{w}"

    def hash(self) -> str:
        return config_hash(self.canonical().to_dict())


def parse_window(value: Any) -> int | None:
    """`None`, "none", "all" or a positive int (also as a string)."""
    if value is None:
        return None
    if isinstance(value, str):
        if value.strip().lower() in ("none", "all", ""):
            return None
        try:
            return int(value)
        except ValueError:
            raise UserError(f"window must be a positive integer or 'none'; got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"window must be a positive integer or 'none'; got {value!r}")
    return value


def _check_int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{name} must be an integer; got {value!r}")
    if not low <= value <= high:
        raise UserError(f"{name} must be between {low} and {high}; got {value}")


def config_hash(config: dict[str, Any]) -> str:
    """Stable 16-hex-digit hash of a JSON-able config (key order does not matter)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


__all__ = ["DecodeParams", "MODES", "config_hash", "parse_window"]
