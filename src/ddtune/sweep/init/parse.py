"""A launch command read the way its engine reads it: model, drafter, method, knobs, the rest.

    found = find_engine(argv)                    # EngineLaunch: sglang | vllm, its Python, args
    options = engine_options(found, env)        # the engine's own option table, or None
    launch = parse_launch(found, options)       # ParsedLaunch: what `sweep init` needs

Which flag sets what is decided by the engine's own parser where it is
installed: its option table (every option string and the field it sets, the
probe of `ddtune.engines.parser_probe`), so aliases (`--model` for
`--model-path`, `-tp`) and argparse's unique-prefix abbreviations resolve as
the engine would resolve them. Where the engine is not installed here, the
option strings below (SGLang 0.5.23 and its DDTree pull request, vLLM 0.32)
stand in. Every argument that
sets none of the fields read here is kept verbatim, in order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddtune.engines.parser_probe import EngineProbe, ProbeError
from ddtune.engines.sglang import SGLANG_MODULE, WINDOW_FIELDS
from ddtune.engines.vllm import VLLM_MODULE
from ddtune.errors import UserError

# The fields `sweep init` reads, with the option strings that set them where the engine's
# own table is not available (each takes one value).
KNOWN_OPTIONS: dict[str, dict[str, str]] = {
    "sglang": {
        "--model-path": "model_path",
        "--model": "model_path",
        "--speculative-draft-model-path": "speculative_draft_model_path",
        "--speculative-draft-model": "speculative_draft_model_path",
        "--speculative-algorithm": "speculative_algorithm",
        "--speculative-ddtree-budget": "speculative_ddtree_budget",
        "--speculative-draft-window-size": "speculative_draft_window_size",
        "--speculative-dflash-draft-window-size": "speculative_dflash_draft_window_size",
        "--speculative-num-steps": "speculative_num_steps",
        "--speculative-eagle-topk": "speculative_eagle_topk",
        "--speculative-num-draft-tokens": "speculative_num_draft_tokens",
        "--tp-size": "tp_size",
        "--tensor-parallel-size": "tp_size",
        "--host": "host",
        "--port": "port",
    },
    "vllm": {
        "--model": "model",
        "--speculative-config": "speculative_config",
        "--tensor-parallel-size": "tensor_parallel_size",
        "-tp": "tensor_parallel_size",
        "--host": "host",
        "--port": "port",
    },
}
# Read, and kept in the command as written (they size the bench, they are not swept).
KNOWN_OPTIONS["sglang"]["--context-length"] = "context_length"
KNOWN_OPTIONS["vllm"]["--max-model-len"] = "max_model_len"
ENGINE_MODULES = {SGLANG_MODULE: "sglang", VLLM_MODULE: "vllm"}
ENTRY_POINTS = ("sglang", "vllm")  # `sglang serve ...`, `vllm serve MODEL ...`
DEFAULT_PORTS = {"sglang": 30000, "vllm": 8000}
SIZE_FIELDS = {  # (tensor parallel, served context) per engine
    "sglang": ("tp_size", "context_length"),
    "vllm": ("tensor_parallel_size", "max_model_len"),
}
SGLANG_KNOBS = (  # the method's settings an SGLang command gives (whole numbers)
    "speculative_ddtree_budget",
    *WINDOW_FIELDS,
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
)


@dataclass(frozen=True)
class EngineLaunch:
    """Which engine a command runs, in which Python, and the arguments it reads."""

    engine: str  # "sglang" | "vllm"
    python: str  # the engine's interpreter (for an entry point: the one beside it)
    args: tuple[str, ...]  # what follows `python -m MODULE` (or `ENTRY serve`)
    positional_model: str | None = None  # `vllm serve MODEL`


@dataclass(frozen=True)
class Span:
    """Where a field is written in the arguments: `--flag value` (2) or `--flag=value` (1)."""

    start: int
    length: int

    def value_index(self) -> int:
        return self.start + self.length - 1

    def indices(self) -> range:
        return range(self.start, self.start + self.length)


@dataclass(frozen=True)
class ParsedLaunch:
    """What `sweep init` learned from a launch command."""

    engine: str
    python: str
    model: str
    drafter: str | None
    method: str | None  # the engine's own spelling: DDTREE, DFLASH, EAGLE3, ngram, dflash, ...
    knobs: dict[str, Any]  # the method's settings as the engine names them
    tp: int
    host: str
    port: int
    args: tuple[str, ...]  # the engine's arguments as written
    spans: dict[str, Span]  # where each field read here is written in `args`
    context_tokens: int | None = None  # --context-length / --max-model-len, when given
    speculative_config: dict[str, Any] = field(default_factory=dict)  # vLLM's JSON, whole
    parser: str = "ddtune's table of the engine's flags"  # what resolved the flags
    positional_model: bool = False  # `vllm serve MODEL`: the model is not a flag

    @property
    def window(self) -> int | None:
        """The drafter window the command sets (SGLang: either release's flag), None: all."""
        new, old = WINDOW_FIELDS
        return self.knobs.get(new) or self.knobs.get(old)

    def kept(self, *fields: str) -> list[str]:
        """The arguments without the flags of `fields`, each other one verbatim and in order."""
        drop = {i for f in fields if f in self.spans for i in self.spans[f].indices()}
        return [escape(arg) for i, arg in enumerate(self.args) if i not in drop]

    def template(self, values: Mapping[str, str]) -> list[str]:
        """The arguments with the value of each field in `values` replaced (a placeholder),
        every other argument verbatim (braces doubled for the spec's templates)."""
        out = [escape(arg) for arg in self.args]
        for dest, value in values.items():
            span = self.spans[dest]
            i = span.value_index()
            out[i] = (self.args[i].split("=", 1)[0] + "=" + value) if span.length == 1 else value
        return out

    def spliced(self, values: Mapping[str, str], fields: Sequence[str], marker: str) -> list[str]:
        """`template(values)` with the flags of `fields` taken out and `marker` (one argument)
        where the first of them was written; every other argument verbatim."""
        out = self.template(values)
        drop = {i for f in fields if f in self.spans for i in self.spans[f].indices()}
        kept = [arg for i, arg in enumerate(out) if i not in drop]
        kept.insert(min(drop, default=len(out)), marker)
        return kept

    def spelled(self, dest: str) -> list[str]:
        """How the command wrote one field (`--tp-size 8`), braces doubled."""
        span = self.spans[dest]
        return [escape(self.args[i]) for i in span.indices()]


def find_engine(argv: tuple[str, ...]) -> EngineLaunch:
    """The engine behind `argv`: `PY -m sglang.launch_server|vllm...api_server ...` or an
    entry point (`sglang serve ...`, `vllm serve MODEL ...`); else a `UserError`."""
    if len(argv) >= 3 and argv[1] == "-m" and argv[2] in ENGINE_MODULES:
        return EngineLaunch(ENGINE_MODULES[argv[2]], argv[0], argv[3:])
    name = Path(argv[0]).name
    if name in ENTRY_POINTS and len(argv) >= 2 and argv[1] == "serve":
        python = str(Path(argv[0]).with_name("python")) if "/" in argv[0] else "python3"
        rest = argv[2:]
        if name == "vllm" and rest and not rest[0].startswith("-"):
            return EngineLaunch(name, python, rest[1:], positional_model=rest[0])
        return EngineLaunch(name, python, rest)
    raise UserError(
        f"the launch command ({' '.join(argv[:3])} ...) runs neither SGLang "
        f"(`python -m {SGLANG_MODULE}`, `sglang serve`) nor vLLM (`python -m {VLLM_MODULE}`, "
        "`vllm serve`); sweep init knows these two engines"
    )


def engine_options(found: EngineLaunch, env: Mapping[str, str]) -> Mapping[str, str] | None:
    """The engine's own option table (option string -> field), asked of its Python; None
    where that Python does not exist here or the engine does not import in it."""
    if not Path(found.python).is_file():
        return None
    try:
        with EngineProbe(found.engine, found.python, env={**os.environ, **env}, timeout=300) as p:
            return p.info().options
    except ProbeError:
        return None


def parse_launch(found: EngineLaunch, options: Mapping[str, str] | None) -> ParsedLaunch:
    """Split the arguments into the fields read here and the rest (kept verbatim)."""
    # the engine's own table decides; a flag only ddtune's table knows (a build's own flag
    # the installed engine lacks) still reads, and the plan's engine check judges it
    table = {**KNOWN_OPTIONS[found.engine], **(options or {})}
    wanted = set(KNOWN_OPTIONS[found.engine].values())
    values, spans = _split(found.args, table, wanted)
    read = _sglang if found.engine == "sglang" else _vllm
    tp, context = SIZE_FIELDS[found.engine]
    return ParsedLaunch(
        engine=found.engine,
        python=found.python,
        tp=_int(values.get(tp, "1"), tp),
        host=values.get("host", "127.0.0.1"),
        port=_int(values.get("port", str(DEFAULT_PORTS[found.engine])), "port"),
        args=found.args,
        spans=spans,
        context_tokens=_int(values[context], context) if context in values else None,
        parser="the engine's own parser" if options else "ddtune's table of the engine's flags",
        **read(found, values),
    )


def _split(
    args: tuple[str, ...], table: Mapping[str, str], wanted: set[str]
) -> tuple[dict[str, str], dict[str, Span]]:
    """(field -> value, field -> where it is written) for the wanted fields."""
    values: dict[str, str] = {}
    spans: dict[str, Span] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=")
        dest = _dest(name, table) if arg.startswith("-") else None
        if dest not in wanted:
            i += 1
            continue
        if not eq and i + 1 >= len(args):
            raise UserError(f"the launch command ends at {arg}, which needs a value")
        values[str(dest)] = inline if eq else args[i + 1]
        spans[str(dest)] = Span(i, 1 if eq else 2)
        i += spans[str(dest)].length
    return values, spans


def _dest(flag: str, table: Mapping[str, str]) -> str | None:
    """The field a flag sets: exact, or by a unique prefix (argparse's abbreviations)."""
    if flag in table:
        return table[flag]
    found = {dest for opt, dest in table.items() if flag.startswith("--") and opt.startswith(flag)}
    return found.pop() if len(found) == 1 else None


def _sglang(found: EngineLaunch, values: dict[str, str]) -> dict[str, Any]:
    """The model and method fields of an SGLang command."""
    model = values.get("model_path")
    if not model:
        raise UserError("the SGLang command has no --model-path: sweep init needs the model")
    algorithm = values.get("speculative_algorithm")
    return {
        "model": model,
        "drafter": values.get("speculative_draft_model_path"),
        "method": algorithm.upper() if algorithm else None,
        "knobs": {dest: _int(values[dest], dest) for dest in SGLANG_KNOBS if dest in values},
    }


def _vllm(found: EngineLaunch, values: dict[str, str]) -> dict[str, Any]:
    """The model and method fields of a vLLM command (its `--speculative-config` JSON)."""
    model = values.get("model") or found.positional_model
    if not model:
        raise UserError("the vLLM command names no model (--model or `vllm serve MODEL`)")
    config: dict[str, Any] = {}
    if "speculative_config" in values:
        try:
            config = json.loads(values["speculative_config"])
        except json.JSONDecodeError as exc:
            raise UserError(f"--speculative-config is not JSON: {exc}") from None
        if not isinstance(config, dict):
            raise UserError("--speculative-config must be a JSON object")
    return {
        "model": model,
        "drafter": config.get("model"),
        "method": str(config["method"]) if "method" in config else None,
        "knobs": {k: v for k, v in config.items() if k not in ("method", "model")},
        "speculative_config": config,
        "positional_model": found.positional_model is not None,
    }


def escape(text: str) -> str:
    """A literal argument inside a spec template: braces doubled."""
    return text.replace("{", "{{").replace("}", "}}")


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UserError(f"the launch command sets {name} to {text!r}, not a whole number") from None


__all__ = [
    "SGLANG_KNOBS",
    "EngineLaunch",
    "ParsedLaunch",
    "Span",
    "escape",
    "engine_options",
    "find_engine",
    "parse_launch",
]
