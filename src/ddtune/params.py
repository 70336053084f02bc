"""The parameter vocabulary shared by engine, server, services, sweep and report.

One `DecodeParams` names a speculative-decoding configuration the same way
for every engine (docs/architecture.md "Contracts"):

    mode    ar | dflash | ddtree
    budget  tree node budget B (nodes besides the root), ddtree only
    topk    per-depth branching cap K, ddtree only
    window  drafter context window W (None = the whole context)

Two DDTree knobs only some engines expose (`KNOB_KEYS`; SGLang's DDTree pull
request reads them from its environment, ddtune's own engine has none). An
engine lists the knobs it can honour (`ServerEngine.knobs`); the sweep spec
refuses a knob for an engine that cannot. `None` = not set: the engine's default.

    depth_bonus  log-probability bonus for going deeper in the tree (SGLang default 0.2;
                 lower or negative = wider trees)
    rank_probe   log where the target's token ranks in the draft top-k (default off)

A method beyond these three (EAGLE, EAGLE-3, MTP, n-gram; `ddtune.methods`), or a
DFlash/DDTree config with engine knobs (block size, drafter), sets `method` and
`method_knobs` too; its `mode` is the method's family (`Method.mode`). Configs
without them keep their wire form and hashes. `method_config()` gives the
`MethodConfig` every config stands for (`ar`, `dflash`, `ddtree` from `mode`).

`SamplingParams` is the per-request rest (length, temperature, stops).

Inside the process these objects travel as themselves. At a process boundary
(TOML, JSON, argv, HTTP) they are rendered by `to_wire()` and read back by
`from_wire()` and nowhere else; on the wire `window = None` is `"none"`, and
a knob that is not set is left out (so configs without knobs keep their
hashes); as a launch placeholder it renders as `"default"` (`placeholder_values`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, FiniteFloat, ValidationError
from pydantic.dataclasses import dataclass

from ddtune.errors import UserError
from ddtune.methods import LEGACY, KnobValue, MethodConfig
from ddtune.tables import validation_to_user_error

PARAM_KEYS = ("mode", "budget", "topk", "window")
KNOB_KEYS = ("depth_bonus", "rank_probe")  # engine-specific DDTree knobs (module docstring)
DECODE_KEYS = (*PARAM_KEYS, *KNOB_KEYS)
METHOD_KEYS = ("method", "method_knobs")  # on the wire only when a method sets them
WIRE_KEYS = (*DECODE_KEYS, *METHOD_KEYS)
KNOB_DEFAULT = "default"  # a knob that is not set, as a launch placeholder
MODES = ("ar", "dflash", "ddtree")
Mode = Literal["ar", "dflash", "ddtree"]
# the parameters each mode reads (the others take their canonical values)
MODE_PARAMS: dict[str, tuple[str, ...]] = {
    "ar": (),
    "dflash": ("window",),
    "ddtree": ("budget", "topk", "window"),
}
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
    depth_bonus: FiniteFloat | None = None  # knob (module docstring); None = engine default
    rank_probe: bool | None = None  # knob; None = engine default
    method: str | None = None  # a `ddtune.methods` name; None: the one `mode` names
    method_knobs: tuple[tuple[str, KnobValue], ...] = ()  # its knobs that are set, sorted

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], where: str = "") -> DecodeParams:
        """Strict: unknown keys are an error; `window` is an int, None or "none"."""
        if not isinstance(data, Mapping):
            raise UserError(f"{where or 'decoding parameters'} must be a table; got {data!r}")
        unknown = sorted(set(data) - set(WIRE_KEYS))
        if unknown:
            name = ".".join(filter(None, [where, unknown[0]]))
            raise UserError(
                f"unknown decoding parameter {name}; expected some of {', '.join(DECODE_KEYS)}",
                key=name,
            )
        values = dict(data)
        if "method" in values:
            return with_method(values, where)
        if "window" in values:
            values["window"] = window_from_wire(values["window"], where)
        if isinstance(values.get("depth_bonus"), int) and not isinstance(
            values["depth_bonus"], bool
        ):
            values["depth_bonus"] = float(values["depth_bonus"])  # TOML `0` for 0.0
        return build(cls, values, where)

    def to_wire(self) -> dict[str, Any]:
        """JSON/TOML-safe dict: every key of `PARAM_KEYS` (window None as "none"), and the
        knobs that are set."""
        return {**self._set_fields(), "window": window_to_wire(self.window)}

    def _set_fields(self) -> dict[str, Any]:
        """Every key of `PARAM_KEYS`, the knobs that are set, the method when one is set."""
        fields = {**{key: getattr(self, key) for key in PARAM_KEYS}, **self.knobs()}
        if self.method is not None:
            fields |= {"method": self.method, "method_knobs": dict(self.method_knobs)}
        return fields

    def verify_tokens(self, block_size: int) -> int:
        """Tokens one verify forward runs: the root plus the tree (DFlash: its block)."""
        if self.mode == "ar":
            return 1
        if self.mode == "dflash":
            return block_size
        return self.budget + 1

    def method_config(self) -> MethodConfig:
        """The method this config runs and its knobs (`ar`/`dflash`/`ddtree` from `mode`)."""
        return MethodConfig(self.method or self.mode, self.method_knobs)

    def knobs(self) -> dict[str, Any]:
        """The knobs that are set, by name (`KNOB_KEYS`)."""
        return {key: getattr(self, key) for key in KNOB_KEYS if getattr(self, key) is not None}

    def placeholder_values(self) -> dict[str, str]:
        """Every key as a launch placeholder: the wire form, a knob not set as "default"."""
        wire = self.to_wire()
        values = {key: str(wire[key]) for key in PARAM_KEYS}
        for key in KNOB_KEYS:
            values[key] = knob_to_text(getattr(self, key))
        return values

    def with_updates(self, updates: Mapping[str, Any], where: str = "") -> DecodeParams:
        """A copy with some wire-form keys replaced (validated like `from_wire`)."""
        return DecodeParams.from_wire({**self.to_wire(), **updates}, where)

    def canonical(self) -> DecodeParams:
        """Drop the parameters a mode ignores, so equal behaviour hashes equal.

        The knobs shape DDTree's tree: only `ddtree` keeps them. A method beyond `mode`'s
        keeps its own knobs only (and DFlash's window)."""
        if self.method is not None and self.method not in LEGACY:
            return DecodeParams(
                self.mode, 0, 1, None, method=self.method, method_knobs=self.method_knobs
            )
        if self.method is not None:
            base = replace(self, method=None, method_knobs=()).canonical()
            return replace(base, method=self.method, method_knobs=self.method_knobs)
        if self.mode == "ar":
            return DecodeParams("ar", 0, 1, None)
        if self.mode == "dflash":
            return DecodeParams("dflash", 0, 1, self.window)
        return self

    def label(self) -> str:
        """Short human label, e.g. `ddtree b16 k4 wnone`, `ddtree b8 k4 w64 bonus0.5 probe`,
        `ar`, or a method's: `eagle3 num_steps=3 topk=1 num_draft_tokens=4`."""
        if self.method is not None:
            base = replace(self, method=None, method_knobs=()).label()
            shown = self.method_config().label()
            knobs = shown.removeprefix(self.method).strip()
            return f"{base} {knobs}".strip() if self.method in LEGACY else shown
        w = window_to_wire(self.window)
        if self.mode == "ar":
            return "ar"
        if self.mode == "dflash":
            return f"dflash w{w}"
        knobs = ""
        if self.depth_bonus is not None:
            knobs += f" bonus{self.depth_bonus:g}"
        if self.rank_probe is not None:
            knobs += " probe" if self.rank_probe else " noprobe"
        return f"ddtree b{self.budget} k{self.topk} w{w}{knobs}"

    def hash(self) -> str:
        """Of the canonical form; knobs that are not set are left out (stable old hashes)."""
        return config_hash(self.canonical()._set_fields())

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


def with_method(values: dict[str, Any], where: str = "") -> DecodeParams:
    """Wire values naming a `method` (and `method_knobs`): checked by the method's own rules.

    `ar`, `dflash` or `ddtree` without knobs is the same config as that `mode` (same hash)."""
    name, knobs = values.pop("method"), values.pop("method_knobs", None) or {}
    if not isinstance(knobs, Mapping):
        raise UserError(f"{where or 'method_knobs'}: method knobs must be a table; got {knobs!r}")
    config = MethodConfig.build(name, knobs, where)
    mode = config.method.mode
    if values.get("mode", mode) != mode:
        raise UserError(
            f"{where or 'config'}: method {config.name} runs as mode {mode!r}; "
            f"got mode {values['mode']!r} (leave mode out)"
        )
    values["mode"] = mode
    if config.name in LEGACY and not config.knobs:
        return DecodeParams.from_wire(values, where)
    params: DecodeParams = DecodeParams.from_wire(values, where)
    return replace(params, method=config.name, method_knobs=config.knobs)


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


def knob_to_text(value: float | bool | None) -> str:
    """A knob as text (placeholders, the launcher): "default" when not set, true/false, 0.5."""
    if value is None:
        return KNOB_DEFAULT
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(float(value))


def parse_knob(key: str, text: str | None) -> float | bool | None:
    """The launcher's form of a knob (`knob_to_text`'s output) back to its value."""
    if text is None or text.strip().lower() in (KNOB_DEFAULT, ""):
        return None
    cleaned = text.strip().lower()
    if key == "rank_probe":
        if cleaned in ("true", "1", "yes", "on"):
            return True
        if cleaned in ("false", "0", "no", "off"):
            return False
        raise UserError(f"{key} must be true, false or 'default'; got {text!r}", key=key)
    try:
        value = float(cleaned)
    except ValueError:
        value = float("nan")
    if value != value or value in (float("inf"), float("-inf")):
        raise UserError(f"{key} must be a finite number or 'default'; got {text!r}", key=key)
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
    "DECODE_KEYS",
    "KNOB_DEFAULT",
    "KNOB_KEYS",
    "MAX_LOGPROBS",
    "METHOD_KEYS",
    "WIRE_KEYS",
    "MODES",
    "MODE_PARAMS",
    "PARAM_KEYS",
    "WINDOW_NONE",
    "DecodeParams",
    "Mode",
    "SamplingParams",
    "config_hash",
    "knob_to_text",
    "parse_knob",
    "parse_window",
    "window_from_wire",
    "window_to_wire",
]
