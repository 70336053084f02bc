"""The speculative-decoding methods, their knobs and rules, and how each engine spells them.

One table (`METHODS`) names every method a sweep can run, for every engine:

    method   knobs (besides DecodeParams' own)           SGLang                 vLLM method
    ar       -                                           (no flags)             (no config)
    dflash   block_size, drafter                         DFLASH                 dflash
    ddtree   drafter (budget/topk/window: DecodeParams)  DDTREE (PR #29907)     -
    eagle    num_steps, topk, num_draft_tokens, drafter  EAGLE                  eagle
    eagle3   num_steps, topk, num_draft_tokens, drafter  EAGLE3                 eagle3
    mtp      num_steps, topk, num_draft_tokens           NEXTN (reported EAGLE) mtp
    ngram    num_draft_tokens, prompt_lookup_min/max,    NGRAM                  ngram
             min/max_bfs_breadth, max_trie_depth

`mode`, `budget`, `topk` and `window` stay `DecodeParams` fields (ddtune's own
engine reads them; `window` is DFlash's and DDTree's draft window). The knobs
here ride in `DecodeParams.method_knobs`; a knob that is not set is left to
the engine's default. `MethodConfig.check()` applies the rules the installed
releases state (SGLang 0.5.23 `speculative_hook.py`, vLLM 0.32
`config/speculative.py`): EAGLE steps/topk/draft tokens all or none on SGLang,
topk 1 means draft tokens = steps + 1 (SGLang would change any other value),
`prompt_lookup_min <= prompt_lookup_max`, `min_bfs_breadth <= max_bfs_breadth`,
a DFlash window at least the block size. Where a release differs, the
engine's own parser decides in the engine check (`ddtune.engines.parser_probe`).

`engine_knobs(method, engine)` is what one engine can set; `engine_spelling`
renders a config as SGLang flags (`sglang_flags`), a vLLM `--speculative-config`
object (`vllm_speculative_config`) and the `/server_info` fields each engine
reports back (`sglang_reported` / `vllm_reported`), so launch and readiness
read the same table. No engine imports here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ddtune.errors import UserError

KnobValue = int | str
METHOD_ENGINES = ("ddtune", "sglang", "vllm")  # the engines that spell methods
DRAFTER = "drafter"  # the draft model path, a knob of the methods that need one
# methods whose rounds follow from the target's T = 0 answers alone (no draft model): a
# forecast of them needs no trace (`ddtune.trace.ngram`)
FROM_OUTPUTS = ("ar", "ngram")
# chain methods: a draft at position i does not depend on K, so at topk 1 one run at the
# largest num_steps predicts every smaller one (`ddtune.trace.chains`)
CHAIN_METHODS = ("eagle", "eagle3", "mtp")


def needs_trace(methods: Iterable[str], counts_drafts: bool) -> list[str]:
    """The methods a prediction needs a trace for: all but those the baseline's answers
    predict and, on an engine that counts acceptance per draft position, the chains."""
    untraced = {*FROM_OUTPUTS, *(CHAIN_METHODS if counts_drafts else ())}
    return sorted(set(methods) - untraced)


@dataclass(frozen=True)
class Knob:
    """One knob: an integer in [low, high] (or a path for `drafter`); None default = the
    engine's own."""

    name: str
    help: str
    low: int = 1
    high: int = 1024
    kind: type = int

    def check(self, value: Any, where: str) -> KnobValue:
        key = f"{where}.{self.name}" if where else self.name
        if self.kind is str:
            if not isinstance(value, str) or not value:
                raise UserError(
                    f"{key} must be a path (a non-empty string); got {value!r}", key=key
                )
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"{key} must be an integer; got {value!r}", key=key)
        if not self.low <= value <= self.high:
            raise UserError(
                f"{key} must be between {self.low} and {self.high}; got {value}", key=key
            )
        return value


_DRAFTER = Knob(DRAFTER, "draft model path", kind=str)
_STEPS = Knob("num_steps", "draft steps per round (vLLM: num_speculative_tokens)", 1, 64)
_EAGLE_TOPK = Knob("topk", "tokens kept per draft step (SGLang --speculative-eagle-topk)", 1, 64)
_DRAFT_TOKENS = Knob("num_draft_tokens", "tokens verified per round", 1, 1024)


@dataclass(frozen=True)
class Method:
    """One method: its knobs, which engines run it, and under which name."""

    name: str
    help: str
    mode: str  # the DecodeParams mode it shares (ddtune's engine runs ar/dflash/ddtree only)
    knobs: tuple[Knob, ...] = ()
    spelled: Mapping[str, str | None] = field(default_factory=dict)  # engine -> its name
    engine_knobs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def knob(self, name: str) -> Knob | None:
        return next((k for k in self.knobs if k.name == name), None)

    def knob_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.knobs)


_EAGLE_KNOBS = (_STEPS, _EAGLE_TOPK, _DRAFT_TOKENS)
_EAGLE_ENGINES = {
    "sglang": ("num_steps", "topk", "num_draft_tokens", DRAFTER),
    "vllm": ("num_steps", DRAFTER),
}
METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("ar", "plain autoregressive decoding", "ar", (), {e: "" for e in METHOD_ENGINES}),
        Method(
            "dflash",
            "DFlash: a block drafter proposes a chain (window: DecodeParams)",
            "dflash",
            (Knob("block_size", "drafter block: tokens verified per round", 2, 64), _DRAFTER),
            {"ddtune": "dflash", "sglang": "DFLASH", "vllm": "dflash"},
            {"ddtune": (), "sglang": ("block_size", DRAFTER), "vllm": ("block_size", DRAFTER)},
        ),
        Method(
            "ddtree",
            "DDTree: a DFlash drafter's best-first tree (budget/topk/window: DecodeParams)",
            "ddtree",
            (_DRAFTER,),
            {"ddtune": "ddtree", "sglang": "DDTREE", "vllm": None},
            {"ddtune": (), "sglang": (DRAFTER,)},
        ),
        Method(
            "eagle",
            "EAGLE draft head",
            "dflash",
            (*_EAGLE_KNOBS, _DRAFTER),
            {"sglang": "EAGLE", "vllm": "eagle"},
            _EAGLE_ENGINES,
        ),
        Method(
            "eagle3",
            "EAGLE-3 draft head",
            "dflash",
            (*_EAGLE_KNOBS, _DRAFTER),
            {"sglang": "EAGLE3", "vllm": "eagle3"},
            _EAGLE_ENGINES,
        ),
        Method(
            "mtp",
            "the target's own multi-token-prediction layers (SGLang NEXTN)",
            "dflash",
            _EAGLE_KNOBS,
            {"sglang": "NEXTN", "vllm": "mtp"},
            {"sglang": ("num_steps", "topk", "num_draft_tokens"), "vllm": ("num_steps",)},
        ),
        Method(
            "ngram",
            "n-gram lookup in the prompt and output (no draft model)",
            "dflash",
            (
                _DRAFT_TOKENS,
                Knob("prompt_lookup_min", "shortest n-gram matched (vLLM)", 1, 64),
                Knob("prompt_lookup_max", "longest n-gram matched (vLLM)", 1, 64),
                Knob("min_bfs_breadth", "SGLang --speculative-ngram-min-bfs-breadth", 1, 64),
                Knob("max_bfs_breadth", "SGLang --speculative-ngram-max-bfs-breadth", 1, 64),
                Knob("max_trie_depth", "SGLang --speculative-ngram-max-trie-depth", 1, 1024),
            ),
            {"sglang": "NGRAM", "vllm": "ngram"},
            {
                "sglang": (
                    "num_draft_tokens",
                    "min_bfs_breadth",
                    "max_bfs_breadth",
                    "max_trie_depth",
                ),
                "vllm": ("num_draft_tokens", "prompt_lookup_min", "prompt_lookup_max"),
            },
        ),
    )
}
ALIASES = {"nextn": "mtp"}  # SGLang's name for MTP
METHOD_NAMES = tuple(METHODS)
LEGACY = ("ar", "dflash", "ddtree")  # the methods `mode` names (DecodeParams alone carries them)

# SGLang's flag per knob (0.5.23 `arg_groups/fields/spec.py`); its /server_info field is the
# flag's name with underscores.
SGLANG_FLAGS = {
    "num_steps": "--speculative-num-steps",
    "topk": "--speculative-eagle-topk",
    "num_draft_tokens": "--speculative-num-draft-tokens",
    "block_size": "--speculative-num-draft-tokens",  # DFLASH: the verify window is the block
    "min_bfs_breadth": "--speculative-ngram-min-bfs-breadth",
    "max_bfs_breadth": "--speculative-ngram-max-bfs-breadth",
    "max_trie_depth": "--speculative-ngram-max-trie-depth",
    DRAFTER: "--speculative-draft-model-path",
}
# vLLM's `--speculative-config` key per knob (0.32 `config/speculative.py`)
VLLM_KEYS = {
    "num_steps": "num_speculative_tokens",
    "num_draft_tokens": "num_speculative_tokens",
    "prompt_lookup_min": "prompt_lookup_min",
    "prompt_lookup_max": "prompt_lookup_max",
    DRAFTER: "model",
}


def method(name: str, where: str = "") -> Method:
    """The method called `name` (an alias such as SGLang's `nextn` too); UserError otherwise."""
    found = METHODS.get(ALIASES.get(name, name)) if isinstance(name, str) else None
    if found is None:
        key = f"{where}.method" if where else "method"
        raise UserError(
            f"{key}: unknown method {name!r}; expected one of {', '.join(METHOD_NAMES)}", key=key
        )
    return found


@dataclass(frozen=True)
class MethodConfig:
    """A method and the knobs set for it (sorted by name; the rest: the engine's default)."""

    name: str
    knobs: tuple[tuple[str, KnobValue], ...] = ()

    @classmethod
    def build(cls, name: str, knobs: Mapping[str, Any], where: str = "") -> MethodConfig:
        """Check names, types, ranges and the method's own rules; a UserError names the knob."""
        found = method(name, where)
        values: dict[str, KnobValue] = {}
        for key, value in knobs.items():
            knob = found.knob(key)
            if knob is None:
                raise UserError(unknown_knob(found, key, where), key=f"{where}.{key}".strip("."))
            values[key] = knob.check(value, where)
        steps = values.get("num_steps")
        if values.get("topk") == 1 and isinstance(steps, int):
            values.setdefault("num_draft_tokens", steps + 1)  # what topk 1 means
        config = cls(found.name, tuple(sorted(values.items())))
        config.check(where)
        return config

    @property
    def method(self) -> Method:
        return METHODS[self.name]

    def get(self, name: str) -> KnobValue | None:
        return dict(self.knobs).get(name)

    def check(self, where: str = "") -> None:
        """The rules every engine shares (those of one engine: `check_for`)."""
        pairs = (("prompt_lookup_min", "prompt_lookup_max"), ("min_bfs_breadth", "max_bfs_breadth"))
        for low, high in pairs:
            lo, hi = self.get(low), self.get(high)
            if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
                raise UserError(f"{where or self.name}: {low} ({lo}) is above {high} ({hi})")
        steps, topk, tokens = self.get("num_steps"), self.get("topk"), self.get("num_draft_tokens")
        if topk == 1 and isinstance(steps, int) and tokens is not None and tokens != steps + 1:
            raise UserError(
                f"{where or self.name}: with topk 1, num_draft_tokens must be num_steps + 1 "
                f"({steps + 1}); got {tokens} (SGLang would change it to {steps + 1})"
            )

    def check_for(self, engine: str, window: int | None = None, where: str = "") -> None:
        """Can `engine` run this config as written? One line naming what it can set."""
        spelled = self.method.spelled.get(engine)
        label = where or self.label()
        if spelled is None:
            runs = [m.name for m in METHODS.values() if m.spelled.get(engine) is not None]
            raise UserError(
                f"{label}: {engine} has no method {self.name!r}; it runs {', '.join(runs)}"
            )
        allowed = self.method.engine_knobs.get(engine, ())
        written = dict(self.knobs)
        extra = [k for k in self.method.knob_names() if k in written and k not in allowed]
        if extra:
            takes = ", ".join(allowed) or "no knobs"
            raise UserError(
                f"{label}: {engine} cannot set {', '.join(extra)} for {self.name} "
                f"(it takes {takes})"
            )
        if DRAFTER in allowed and self.get(DRAFTER) is None:
            raise UserError(
                f"{label}: {engine}'s {self.name} needs {DRAFTER} (the draft model path)"
            )
        if engine == "sglang":
            self._check_sglang(window, label)
        if engine == "vllm":
            self._check_vllm(label)

    def _check_sglang(self, window: int | None, label: str) -> None:
        eagle = ("num_steps", "topk", "num_draft_tokens")
        if self.method.knob("num_steps") is not None:
            given = [k for k in eagle if self.get(k) is not None]
            if given and len(given) < len(eagle):
                raise UserError(
                    f"{label}: SGLang needs num_steps, topk and num_draft_tokens all set or "
                    f"none (given: {', '.join(given)})"
                )
        block = self.get("block_size")
        if isinstance(block, int) and window is not None and window < block:
            raise UserError(f"{label}: SGLang needs window >= block_size ({window} < {block})")

    def _check_vllm(self, label: str) -> None:
        if self.name == "ar":
            return
        needed = "block_size" if self.name == "dflash" else "num_steps"
        if self.name == "ngram":
            needed = "num_draft_tokens"
        if self.get(needed) is None:
            raise UserError(f"{label}: vLLM's {self.name} needs {needed} (num_speculative_tokens)")

    def label(self) -> str:
        """`eagle3 num_steps=3 topk=1 num_draft_tokens=4` (the drafter path left out)."""
        order = {name: i for i, name in enumerate(self.method.knob_names())}
        ordered = sorted(self.knobs, key=lambda kv: order.get(kv[0], len(order)))
        shown = [f"{k}={v}" for k, v in ordered if k != DRAFTER]
        return " ".join([self.name, *shown])


def engine_method(engine: str, spelled: str) -> Method | None:
    """The method `engine` calls `spelled` (SGLang's `EAGLE3`, `NEXTN`; vLLM's `eagle3`)."""
    for found in METHODS.values():
        name = found.spelled.get(engine)
        if name and name.lower() == spelled.lower():
            return found
    return None


def token_knob(name: str) -> str | None:
    """The knob that sets how many tokens a round drafts: `num_steps` (EAGLE, EAGLE-3, MTP:
    vLLM's num_speculative_tokens, SGLang's steps), ngram's `num_draft_tokens`, DFlash's
    `block_size` (one more: the block holds the bonus token); None for ar and ddtree."""
    if name == "dflash":
        return "block_size"
    if name == "ngram":
        return "num_draft_tokens"
    return "num_steps" if METHODS[name].knob("num_steps") is not None else None


def drafted_tokens(config: MethodConfig) -> int | None:
    """Tokens drafted per round as the config sets them (vLLM's `num_speculative_tokens`,
    SGLang's `num_steps`); None where the config leaves it to the engine (or has none)."""
    knob = token_knob(config.name)
    value = config.get(knob) if knob else None
    if not isinstance(value, int):
        return None
    return value - 1 if knob == "block_size" else value


def tied_knobs(config: MethodConfig) -> tuple[str, ...]:
    """The knobs that follow the token count: `token_knob`, and SGLang's `num_draft_tokens`
    where topk 1 ties it to num_steps + 1."""
    knob = token_knob(config.name)
    if knob is None:
        return ()
    if knob == "num_steps" and config.get("topk") == 1:
        return (knob, "num_draft_tokens")
    return (knob,)


def vllm_method_config(
    spec: Mapping[str, Any], where: str = "--speculative-config"
) -> MethodConfig:
    """A vLLM `--speculative-config` object read back as a method and its knobs, such that
    `vllm_speculative_config` writes the same object; UserError naming what it cannot read."""
    name = spec.get("method")
    found = engine_method("vllm", name) if isinstance(name, str) else None
    if found is None:
        raise UserError(f"{where}: vLLM method {name!r} is not one of ddtune's methods")
    keys = {
        ("num_speculative_tokens" if k == "block_size" else VLLM_KEYS[k]): k
        for k in found.engine_knobs.get("vllm", ())
    }
    knobs: dict[str, Any] = {}
    for key, value in spec.items():
        if key == "method":
            continue
        if key not in keys:
            raise UserError(f"{where}: {key!r} is not a knob of ddtune's {found.name}")
        shift = isinstance(value, int) and keys[key] == "block_size"
        knobs[keys[key]] = value + 1 if shift else value
    config = MethodConfig.build(found.name, knobs, where)
    if vllm_speculative_config(config) != dict(spec):
        raise UserError(f"{where}: ddtune's {found.name} would not write it back as given")
    return config


def unknown_knob(found: Method, key: str, where: str = "") -> str:
    """The line refusing a knob the method lacks, naming the knobs it has."""
    name = f"{where}.{key}" if where else key
    have = ", ".join(found.knob_names()) or "no knobs"
    extra = " (and mode parameters budget/topk/window)" if found.name in LEGACY[1:] else ""
    return f"{name}: method {found.name} has no knob {key!r}; its knobs: {have}{extra}"


def sglang_flags(config: MethodConfig, window_flag: str | None, window: int | None) -> list[str]:
    """SGLang launch flags: algorithm, drafter, the knobs set, the window (`window_flag`)."""
    algorithm = config.method.spelled["sglang"]
    if not algorithm:
        return []
    flags = ["--speculative-algorithm", algorithm]
    for key, value in config.knobs:
        flags += [SGLANG_FLAGS[key], str(value)]
    if window is not None and window_flag and config.name in ("dflash", "ddtree"):
        flags += [window_flag, str(window)]
    return flags


def sglang_reported(config: MethodConfig) -> dict[str, Any]:
    """The `/server_info` fields the running SGLang must report (NEXTN resolves to EAGLE)."""
    algorithm = config.method.spelled["sglang"] or None
    fields: dict[str, Any] = {
        "speculative_algorithm": "EAGLE" if algorithm == "NEXTN" else algorithm
    }
    for key, value in config.knobs:
        fields[SGLANG_FLAGS[key][2:].replace("-", "_")] = value
    topk, steps = config.get("topk"), config.get("num_steps")
    if topk == 1 and isinstance(steps, int):
        fields["speculative_num_draft_tokens"] = steps + 1
    return fields


def vllm_speculative_config(config: MethodConfig) -> dict[str, Any] | None:
    """vLLM's `--speculative-config` object (None: plain decoding)."""
    name = config.method.spelled["vllm"]
    if not name:
        return None
    spec: dict[str, Any] = {"method": name}
    for key, value in config.knobs:
        if key == "block_size":
            spec["num_speculative_tokens"] = int(value) - 1  # the block holds the bonus token
        else:
            spec[VLLM_KEYS[key]] = value
    return spec


def vllm_reported(config: MethodConfig) -> dict[str, Any] | None:
    """The `speculative_config` fields vLLM's `/server_info` must show (None: off): the
    method, its knobs and the draft model path, which vLLM 0.32 keeps as written
    (`SpeculativeConfig.model`; it fills in a path of its own only where none is given:
    the target for mtp, "ngram" for ngram)."""
    return vllm_speculative_config(config)


__all__ = [
    "ALIASES",
    "DRAFTER",
    "FROM_OUTPUTS",
    "CHAIN_METHODS",
    "needs_trace",
    "METHOD_ENGINES",
    "LEGACY",
    "METHODS",
    "METHOD_NAMES",
    "SGLANG_FLAGS",
    "VLLM_KEYS",
    "Knob",
    "KnobValue",
    "Method",
    "MethodConfig",
    "drafted_tokens",
    "engine_method",
    "method",
    "sglang_flags",
    "sglang_reported",
    "tied_knobs",
    "token_knob",
    "unknown_knob",
    "vllm_method_config",
    "vllm_reported",
    "vllm_speculative_config",
]
