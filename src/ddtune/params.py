"""The parameter vocabulary shared by engine, server, services, sweep and report.

One `DecodeParams` names a speculative-decoding configuration the same way
for every engine (docs/architecture.md "Parameters"):

    mode    ar | dflash | ddtree
    budget  tree node budget B (nodes besides the root), ddtree only
    topk    per-depth branching cap K, ddtree only
    window  drafter context window W (None = the whole context)

`SamplingParams` is the per-request rest (length, temperature, stops).

Inside the process these objects travel as themselves. At a process boundary
(TOML, JSON, argv, HTTP) they are rendered by `to_wire()` and read back by
`from_wire()` and nowhere else; on the wire `window = None` is `"none"`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, ValidationError
from pydantic.dataclasses import dataclass

from ddtune.errors import UserError
from ddtune.tables import validation_to_user_error

PARAM_KEYS = ("mode", "budget", "topk", "window")
MODES = ("ar", "dflash", "ddtree")
Mode = Literal["ar", "dflash", "ddtree"]
MAX_BUDGET = 1024
MAX_TOPK = 64
MAX_WINDOW = 1 << 30
MAX_LOGPROBS = 20  # most alternatives reported per token (OpenAI's limit)
WINDOW_NONE = "none"

_STRICT = ConfigDict(strict=True, extra="forbid")


@dataclass(frozen=True, config=_STRICT)
class DecodeParams:
    mode: Mode = "ddtree"
    budget: Annotated[int, Field(ge=0, le=MAX_BUDGET)] = 16
    topk: Annotated[int, Field(ge=1, le=MAX_TOPK)] = 4
    window: Annotated[int, Field(ge=1, le=MAX_WINDOW)] | None = None

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], where: str = "") -> DecodeParams:
        """Strict: unknown keys are an error; `window` is an int, None or "none"."""
        if not isinstance(data, Mapping):
            raise UserError(f"{where or 'decoding parameters'} must be a table; got {data!r}")
        unknown = sorted(set(data) - set(PARAM_KEYS))
        if unknown:
            name = ".".join(filter(None, [where, unknown[0]]))
            raise UserError(
                f"unknown decoding parameter {name}; expected some of {', '.join(PARAM_KEYS)}",
                key=name,
            )
        values = dict(data)
        if "window" in values:
            values["window"] = window_from_wire(values["window"], where)
        return build(cls, values, where)

    def to_wire(self) -> dict[str, Any]:
        """JSON/TOML-safe dict with every key; window None renders as "none"."""
        return {**asdict(self), "window": window_to_wire(self.window)}

    def with_updates(self, updates: Mapping[str, Any], where: str = "") -> DecodeParams:
        """A copy with some wire-form keys replaced (validated like `from_wire`)."""
        return DecodeParams.from_wire({**self.to_wire(), **updates}, where)

    def canonical(self) -> DecodeParams:
        """Drop the parameters a mode ignores, so equal behaviour hashes equal."""
        if self.mode == "ar":
            return DecodeParams("ar", 0, 1, None)
        if self.mode == "dflash":
            return DecodeParams("dflash", 0, 1, self.window)
        return self

    def label(self) -> str:
        """Short human label, e.g. `ddtree b16 k4 wnone` or `ar`."""
        w = window_to_wire(self.window)
        if self.mode == "ar":
            return "ar"
        if self.mode == "dflash":
            return f"dflash w{w}"
        return f"ddtree b{self.budget} k{self.topk} w{w}"

    def hash(self) -> str:
        return config_hash(asdict(self.canonical()))

    def cost(self) -> tuple[int, int, float]:
        """Sort key for "cheaper": smaller budget, then topk, then window (None = widest)."""
        return (self.budget, self.topk, float("inf") if self.window is None else self.window)


@dataclass(frozen=True, config=_STRICT)
class SamplingParams:
    """Per-request sampling: how long, how random, when to stop, what to report.

    `top_k` 0 = off. `min_tokens`: no stop token (EOS, `stop_token_ids`) is chosen and no
    stop string checked before that many tokens. `logprobs` N: each generated token's
    log-probability under the target plus the N most likely (None = not reported);
    `prompt_logprobs` N: the same for every prompt token after the first.
    """

    max_new_tokens: Annotated[int, Field(ge=1)] = 64
    temperature: Annotated[float, Field(ge=0.0)] = 0.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    stop_strings: tuple[str, ...] = ()
    ignore_eos: bool = False
    top_k: Annotated[int, Field(ge=0)] = 0
    min_tokens: Annotated[int, Field(ge=0)] = 0
    logprobs: Annotated[int, Field(ge=0, le=MAX_LOGPROBS)] | None = None
    prompt_logprobs: Annotated[int, Field(ge=0, le=MAX_LOGPROBS)] | None = None

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], where: str = "") -> SamplingParams:
        values = dict(data)
        for key in ("stop_token_ids", "stop_strings"):
            if isinstance(values.get(key), list):
                values[key] = tuple(values[key])
        if isinstance(values.get("temperature"), int) and not isinstance(
            values.get("temperature"), bool
        ):
            values["temperature"] = float(values["temperature"])
        return build(cls, values, where)

    def to_wire(self) -> dict[str, Any]:
        wire = asdict(self)
        wire["stop_token_ids"] = list(self.stop_token_ids)
        wire["stop_strings"] = list(self.stop_strings)
        return wire

    def replace(self, **changes: Any) -> SamplingParams:
        return replace(self, **changes)


def build(cls: Any, values: Mapping[str, Any], where: str = "") -> Any:
    """`cls(**values)` with pydantic's error turned into a `UserError` naming the key."""
    try:
        return cls(**values)
    except ValidationError as exc:
        raise validation_to_user_error(exc, None, where) from None
    except TypeError as exc:  # an unknown keyword
        raise UserError(f"{where or cls.__name__}: {exc}", key=where or None) from None


def window_to_wire(window: int | None) -> int | str:
    """The one rendering of the window: None → "none"."""
    return WINDOW_NONE if window is None else window


def window_from_wire(value: Any, where: str = "") -> int | None:
    """`None`, "none" (any case) or a positive int. Anything else is a `UserError`."""
    key = ".".join(filter(None, [where, "window"]))
    if value is None or (isinstance(value, str) and value.lower() == WINDOW_NONE):
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{key} must be a positive integer or 'none'; got {value!r}", key=key)
    return value


def parse_window(text: str | int | None) -> int | None:
    """Command-line form: "none", "all" or a positive integer written as text."""
    if not isinstance(text, str):
        return window_from_wire(text)
    cleaned = text.strip().lower()
    if cleaned in (WINDOW_NONE, "all", ""):
        return None
    try:
        return window_from_wire(int(cleaned))
    except ValueError:
        raise UserError(f"window must be a positive integer or 'none'; got {text!r}") from None


def config_hash(config: Mapping[str, Any]) -> str:
    """Stable 16-hex-digit hash of a JSON-able config (key order does not matter)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


__all__ = [
    "MAX_LOGPROBS",
    "MODES",
    "PARAM_KEYS",
    "WINDOW_NONE",
    "DecodeParams",
    "Mode",
    "SamplingParams",
    "config_hash",
    "parse_window",
    "window_from_wire",
    "window_to_wire",
]
