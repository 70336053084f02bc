"""`sweep init --methods M1,M2=PATH,...`: the method the service runs, and the others named.

    wanted = parse_methods("ddtree,eagle3=/models/eagle3-head,ngram")
    choice = with_methods(choice, launch, env, block_size, context, wanted)

Every method is one of `ddtune.methods`, written as `[space] method = [...]` with
a `[space.<method>]` table of its own axes, and the command is the engine's own
with `{method_args}` where its speculative flags were: each config's flags (and,
for SGLang's DDTree, its top-k variable) come from the method's knobs, so every
knob reaches the launch and readiness reads it back. An SGLang service that runs
DFLASH or DDTREE is rewritten that way too (its space stays the one around its
running config, `method_space`), since ddtune's launcher form carries one mode only.

A method needs a draft model where the engine needs one (`NAME=PATH`); DDTree and
DFlash share a DFlash drafter, so one the service already runs serves the other.
The axes of an added method (nothing runs it yet, so there is no "around"):

    ddtree   budget 8, 16, 32; topk 4 and 6 (SGLang's default); the running windows
    dflash   block_size: the drafter's block and the two below it; the running windows
    eagle, eagle3, mtp   num_steps 2, 3, 4 (SGLang: topk 1, so draft tokens = steps + 1)
    ngram    num_draft_tokens 4, 8, 12 (SGLang) or 2, 4, 6 (vLLM); the rest the engine's
    ar       plain decoding: one config, to see what speculation buys at all
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddtune.engines.sglang import KNOB_ENV, SGLANG_MODULE, TOPK_ENV
from ddtune.errors import UserError
from ddtune.methods import ALIASES, DRAFTER, METHODS, method
from ddtune.services.spec import METHOD_ARGS
from ddtune.sweep.init.method_space import (
    SGLANG_DEFAULT_TOPK,
    WILDCARD_HOSTS,
    SpaceChoice,
    around,
    ddtree_around,
    ddtree_knobs,
    windows_around,
)
from ddtune.sweep.init.parse import SGLANG_KNOBS, ParsedLaunch
from ddtune.sweep.init.sizing import drafter_block

# the fields of an SGLang command that `{method_args}` writes instead
SGLANG_SPECULATIVE = ("speculative_algorithm", "speculative_draft_model_path", *SGLANG_KNOBS)
DFLASH_DRAFTERS = ("dflash", "ddtree")  # the methods a DFlash drafter serves
ADDED_BUDGETS = [8, 16, 32]
ADDED_TOPKS = [4, SGLANG_DEFAULT_TOPK]
ADDED_STEPS = [2, 3, 4]
ADDED_NGRAM = {"sglang": [4, 8, 12], "vllm": [2, 4, 6]}


@dataclass(frozen=True)
class Wanted:
    """One item of `--methods`: a method of `ddtune.methods` and its draft model, if given."""

    name: str
    drafter: str | None = None


def parse_methods(text: str) -> list[Wanted]:
    """`ddtree,eagle3=/models/head,ngram` -> the methods in order (one line per mistake)."""
    wanted: list[Wanted] = []
    for item in (part.strip() for part in text.split(",")):
        name, eq, path = item.partition("=")
        if not name:
            raise UserError(
                f"--methods {text!r}: an empty name; write NAME or NAME=DRAFTER, comma-separated",
                key="methods",
            )
        found = method(ALIASES.get(name.lower(), name.lower()), "--methods").name
        if eq and not path:
            raise UserError(f"--methods: {name}= names no draft model path", key="methods")
        if any(w.name == found for w in wanted):
            raise UserError(f"--methods names {found} twice", key="methods")
        wanted.append(Wanted(found, path or None))
    return wanted


def running_method(launch: ParsedLaunch) -> str:
    """ddtune's name of the method the command runs (SGLang's DFLASH is `dflash`, ...)."""
    from ddtune.methods import engine_method

    found = engine_method(launch.engine, launch.method or "")
    return found.name if found is not None else (launch.method or "").lower()


def with_methods(
    choice: SpaceChoice,
    launch: ParsedLaunch,
    env: dict[str, str],
    block_size: int | None,
    context: int | None,
    wanted: list[Wanted],
) -> SpaceChoice:
    """`choice` (the running method's space) with the other `wanted` methods added; the
    command carries `{method_args}` (module doc). Nothing to add: `choice` as it is."""
    running = running_method(launch)
    added = [w for w in wanted if w.name != running]
    if not added:
        return choice
    if METHOD_ARGS not in choice.command:
        if launch.engine != "sglang" or running not in DFLASH_DRAFTERS:
            raise UserError(
                f"--methods: the service's {launch.method} config is written with the variable "
                "K (a key ddtune's methods lack), so other methods cannot be added to its "
                'command; write the spec by hand (docs/engines.md "Methods")',
                key="methods",
            )
        choice = sglang_as_methods(launch, env, block_size, context)
    for item in added:
        _add(choice, launch, item, context)
    choice.notes.append(_methods_note(running, added))
    return choice


def sglang_as_methods(
    launch: ParsedLaunch, env: dict[str, str], block_size: int | None, context: int | None
) -> SpaceChoice:
    """SGLang running DFLASH or DDTREE, as a method of its own: SGLang's command with
    `{method_args}`, the space around the running config in `[space.<method>]`."""
    name = running_method(launch)
    subs = {"model_path": "{model}", "port": "{port}"}
    if "host" in launch.spans and launch.host not in WILDCARD_HOSTS:
        subs["host"] = "{host}"
    argv = launch.spliced(subs, [f for f in SGLANG_SPECULATIVE if f in launch.spans], METHOD_ARGS)
    choice = SpaceChoice([launch.python, "-m", SGLANG_MODULE, *argv], {"model": launch.model})
    window = launch.window
    axes: dict[str, Any] = {}
    base: dict[str, Any] = {"method": name, "window": window or "none"}
    if name == "ddtree":
        ddtree_axes, running = ddtree_around(launch, env)
        axes.update(ddtree_axes)
        base.update(running)
        for key, value in ddtree_knobs(env).items():  # kept at the unit's value
            axes[key], base[key] = [value], value
    else:
        _dflash_tokens(launch, block_size, axes, base, choice)
    axes["window"] = _windows(windows_around(window, context), axes.get("block_size"))
    axes[DRAFTER] = base[DRAFTER] = launch.drafter
    choice.space = {"method": [name], name: axes}
    choice.baseline = base
    choice.windows = [w for w in axes["window"] if isinstance(w, int)]
    choice.drop_env = (TOPK_ENV, *KNOB_ENV.values())
    return choice


def _dflash_tokens(
    launch: ParsedLaunch,
    block_size: int | None,
    axes: dict[str, Any],
    base: dict[str, Any],
    choice: SpaceChoice,
) -> None:
    """SGLang DFLASH's `--speculative-num-draft-tokens` as the method's `block_size` knob,
    around its running value and at most the drafter's block."""
    tokens = launch.knobs.get("speculative_num_draft_tokens")
    if tokens is None:
        choice.notes.append(
            "the service leaves DFLASH's draft tokens to SGLang (the drafter's block): "
            "dflash sweeps its window only"
        )
        return
    axes["block_size"] = around(tokens, high=max(tokens, block_size or tokens + 2))
    base["block_size"] = tokens


def _windows(windows: list[Any], blocks: list[int] | None) -> list[Any]:
    """The finite windows SGLang accepts beside these block sizes (window >= block)."""
    least = max(blocks or [0])
    return [w for w in windows if not isinstance(w, int) or w >= least]


def _add(choice: SpaceChoice, launch: ParsedLaunch, item: Wanted, context: int | None) -> None:
    """One more method in `choice.space`, with the axes of the module doc."""
    found = METHODS[item.name]
    engine = launch.engine
    if found.spelled.get(engine) is None:
        runs = [m.name for m in METHODS.values() if m.spelled.get(engine) is not None]
        raise UserError(
            f"--methods {item.name}: {engine} has no method {item.name} (it runs "
            f"{', '.join(runs)})",
            key="methods",
        )
    axes = _added_axes(engine, item.name, choice, context)
    drafter = _drafter(found.engine_knobs.get(engine, ()), item, launch)
    if drafter is not None:
        axes[DRAFTER] = drafter
    if item.name == "dflash":
        block = drafter_block(Path(drafter)) if drafter else None
        axes.update(_block_axes(block, choice, engine))
    space = choice.space
    space["method"] = [*space.get("method", []), item.name]
    if axes:
        space[item.name] = axes


def _added_axes(engine: str, name: str, choice: SpaceChoice, context: int | None) -> dict[str, Any]:
    """The axes of a method nothing runs yet (module doc)."""
    windows = [*choice.windows, "none"] if choice.windows else windows_around(None, context)
    if name == "ddtree":
        choice.windows = sorted({*choice.windows, *(w for w in windows if isinstance(w, int))})
        return {"budget": ADDED_BUDGETS, "topk": ADDED_TOPKS, "window": windows}
    if name == "dflash":
        choice.windows = sorted({*choice.windows, *(w for w in windows if isinstance(w, int))})
        return {"window": windows}
    if name in ("eagle", "eagle3", "mtp"):
        return (
            {"num_steps": ADDED_STEPS, "topk": 1}
            if engine == "sglang"
            else {"num_steps": ADDED_STEPS}
        )
    if name == "ngram":
        return {"num_draft_tokens": ADDED_NGRAM[engine]}
    return {}


def _block_axes(block: int | None, choice: SpaceChoice, engine: str) -> dict[str, Any]:
    """DFlash's block sizes: the drafter's block and the two below it (its config.json);
    unread: the engine's default (SGLang) or refused (vLLM needs one)."""
    if block is not None:
        return {"block_size": around(block, side=2, low=2, high=block)}
    if engine == "vllm":
        raise UserError(
            "--methods dflash: vLLM needs the block size, and the drafter's config.json "
            "cannot be read here; add [space.dflash] block_size by hand",
            key="methods",
        )
    choice.notes.append("the dflash drafter's block could not be read: SGLang's default is used")
    return {}


def _drafter(knobs: tuple[str, ...], item: Wanted, launch: ParsedLaunch) -> str | None:
    """The draft model an added method runs: `NAME=PATH`, else the running DFlash drafter
    for DDTree/DFlash; a method that needs one and has none is refused."""
    if DRAFTER not in knobs:
        if item.drafter is not None:
            raise UserError(f"--methods {item.name}= : {item.name} takes no draft model")
        return None
    if item.drafter is not None:
        return item.drafter
    if item.name in DFLASH_DRAFTERS and running_method(launch) in DFLASH_DRAFTERS:
        return launch.drafter
    raise UserError(
        f"--methods {item.name} needs its draft model: write {item.name}=PATH "
        f"(e.g. --methods {item.name}=/models/{item.name}-head)",
        key="methods",
    )


def _methods_note(running: str, added: list[Wanted]) -> str:
    names = ", ".join(w.name for w in added)
    return (
        f"methods: {running} (what the service runs) and {names} (--methods); each has its "
        "own [space.<method>] table, and {method_args} in the command becomes each "
        "config's flags"
    )


__all__ = ["Wanted", "parse_methods", "running_method", "sglang_as_methods", "with_methods"]
