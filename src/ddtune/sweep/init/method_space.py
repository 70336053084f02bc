"""The space around a service's current speculative config: ONE function per the method.

    choice = method_space(launch, block_size, front)   # SpaceChoice: command, space, baseline

`method_space` maps (method, knobs) to what the spec sweeps. Methods the
decoding parameters name (SGLang DDTREE and DFLASH: `mode`, `budget`,
`topk`, `window`) run through ddtune's launcher (`python -m
ddtune.launchers sglang`), which leaves out the window flag for "none" and
sets SGLANG_DDTREE_MAX_TOPK from `topk`. Every other method (SGLang EAGLE,
EAGLE3, NEXTN, NGRAM; vLLM's `--speculative-config` methods) is named as a
method of `ddtune.methods` with its knobs (`[space] method` and a
`[space.<method>]` table, or one `[[configs]]` per setting where the engine
ties knobs together); the engine's own command carries `{method_args}` where
the speculative flags were, so readiness reads the method back. A vLLM
config those methods cannot spell (a key they lack) keeps the old way: the
variable K inside the JSON.

Around the current value: the budget with two more values on each side, the
top-k and its neighbours, the current window with "none" and a smaller one,
and a chain length (draft tokens, steps, vLLM's num_speculative_tokens) with
two more on each side where the drafter's block allows (a DFlash drafter
drafts at most `block_size - 1` tokens a round).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ddtune.engines.sglang import KNOB_ENV, TOPK_ENV
from ddtune.errors import UserError
from ddtune.methods import (
    DRAFTER,
    LEGACY,
    METHODS,
    SGLANG_FLAGS,
    engine_method,
    token_knob,
    vllm_method_config,
)
from ddtune.params import MAX_BUDGET, MAX_TOPK, parse_knob
from ddtune.services.spec import METHOD_ARGS
from ddtune.sweep.init.parse import ParsedLaunch, escape

SGLANG_DEFAULT_TOPK = 6  # the DDTree pull request's default when the variable is unset
DEFAULT_WINDOW = 2048  # the finite window tried beside "none" when the service runs none
WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]")
LAUNCHER_FIELDS: tuple[str, ...] = (  # what ddtune's SGLang launcher sets from its options
    "model_path",
    "speculative_draft_model_path",
    "speculative_algorithm",
    "host",
    "port",
    "tp_size",
    "speculative_ddtree_budget",
    "speculative_draft_window_size",
    "speculative_dflash_draft_window_size",
)


@dataclass
class SpaceChoice:
    """What the spec sweeps and how the command carries it."""

    command: list[str]
    vars: dict[str, Any]  # [service.vars]
    space: dict[str, Any] = field(default_factory=dict)  # [space] (its "vars" included)
    configs: list[dict[str, Any]] = field(default_factory=list)  # [[configs]]
    baseline: dict[str, Any] = field(default_factory=dict)
    windows: list[int] = field(default_factory=list)  # the finite windows swept
    drop_env: tuple[str, ...] = ()  # variables the launcher now sets from the parameters
    notes: list[str] = field(default_factory=list)  # comment lines for the spec


def method_space(
    launch: ParsedLaunch,
    env: dict[str, str],
    block_size: int | None,
    front: str,
    context: int | None = None,
) -> SpaceChoice:
    """The space, baseline and command template for the service's method (module doc).

    `env` is the service's environment (SGLang's DDTree top-k lives there),
    `block_size` the drafter's block when its config could be read, `front`
    the Python that runs ddtune's launcher, `context` the served context in
    tokens when known (windows stay within it).
    """
    method = launch.method
    if method is None:
        raise UserError(
            "the launch command runs no speculative method (no --speculative-algorithm / "
            "--speculative-config): there is nothing to tune around; add the method you "
            "want to try to the command and run sweep init again"
        )
    if launch.engine == "sglang" and method in ("DDTREE", "DFLASH"):
        return _sglang_launcher(launch, env, block_size, front, context)
    if launch.engine == "sglang":
        return _sglang_method(launch)
    return _vllm_method(launch, block_size)


def around(
    value: int, step: int = 1, side: int = 2, low: int = 1, high: int = 1 << 30
) -> list[int]:
    """`value` and `side` values on each side, `step` apart, within [low, high]."""
    values = {value + k * step for k in range(-side, side + 1)}
    return sorted(v for v in values if low <= v <= high)


def windows_around(current: int | None, context: int | None) -> list[Any]:
    """The current window, a smaller one, and "none" (a running "none": one finite window)."""
    if current is None:
        finite = [DEFAULT_WINDOW if context is None else min(DEFAULT_WINDOW, context // 4)]
    else:
        finite = [max(1, current // 2), current]
    return [*sorted(set(w for w in finite if w >= 1)), "none"]


def _host(launch: ParsedLaunch) -> str:
    """`{host}` where ddtune's client may connect to it; a wildcard address as written."""
    return launch.host if launch.host in WILDCARD_HOSTS else "{host}"


def _sglang_launcher(
    launch: ParsedLaunch,
    env: dict[str, str],
    block_size: int | None,
    front: str,
    context: int | None,
) -> SpaceChoice:
    owned = LAUNCHER_FIELDS
    if not launch.drafter:
        raise UserError(
            f"the SGLang command runs {launch.method} without --speculative-draft-model-path"
        )
    mode = launch.method.lower() if launch.method else "ddtree"
    window = launch.window
    windows = windows_around(window, context)
    command = [front, "-m", "ddtune.launchers", "sglang", "--python", launch.python]
    command += ["--model-path", "{model}", "--draft-model-path", "{drafter}", "--mode", "{mode}"]
    baseline: dict[str, Any] = {"mode": mode, "window": window or "none"}
    space: dict[str, Any] = {"mode": [mode], "window": windows}
    choice = SpaceChoice(command, {"model": launch.model, "drafter": launch.drafter})
    if mode == "ddtree":
        axes, running = ddtree_around(launch, env)
        space.update(axes)
        baseline.update(running)
        command += ["--budget", "{budget}", "--topk", "{topk}"]
        knobs = ddtree_knobs(env)
        for key, value in knobs.items():  # kept at the unit's value, set by the launcher
            baseline[key], space[key] = value, [value]
            command += ["--" + key.replace("_", "-"), "{" + key + "}"]
        choice.drop_env = (TOPK_ENV, *(KNOB_ENV[key] for key in knobs))
    extra = launch.kept(*owned)
    if mode == "dflash":
        extra, tokens = _dflash_draft_tokens(launch, block_size, choice, owned)
        if tokens is not None:
            high = max(tokens, block_size or tokens + 2)
            space["vars"] = {"draft_tokens": around(tokens, high=high)}
            baseline["vars"] = {"draft_tokens": tokens}
    command += ["--window", "{window}", "--tp", str(launch.tp), "--host", _host(launch)]
    command += ["--port", "{port}", "--", *extra]
    choice.space, choice.baseline = space, baseline
    choice.windows = [w for w in windows if isinstance(w, int)]
    return choice


def _dflash_draft_tokens(
    launch: ParsedLaunch, block_size: int | None, choice: SpaceChoice, owned: tuple[str, ...]
) -> tuple[list[str], int | None]:
    """DFLASH's chain length: `--speculative-num-draft-tokens {draft_tokens}` around the
    current value (or the block's), at most the drafter's block; else the extra arguments."""
    current = launch.knobs.get("speculative_num_draft_tokens") or block_size
    if current is None:
        choice.notes.append(
            "the chain length is SGLang's default (the drafter's block size, which could not "
            "be read here): only the window is swept"
        )
        return launch.kept(*owned), None
    extra = launch.kept(*owned, "speculative_num_draft_tokens")
    choice.vars["draft_tokens"] = current
    choice.notes += _block_note(block_size, current)
    return [*extra, "--speculative-num-draft-tokens", "{draft_tokens}"], current


def _block_note(block_size: int | None, verified: int | None = None) -> list[str]:
    """What the drafter's block means for the space; `verified`: the running round's tokens."""
    if block_size is None:
        return ["the drafter's block size could not be read: chain lengths are not capped by it"]
    if verified is not None and verified > block_size:
        return [
            f"the service runs {verified} tokens a round, past the drafter's block "
            f"({block_size} tokens): `sweep plan` refuses that config until the command's "
            "value is lowered to the block"
        ]
    return [f"the drafter's block is {block_size} tokens: chain lengths stop there"]


def _sglang_method(launch: ParsedLaunch) -> SpaceChoice:
    """EAGLE / EAGLE3 / NEXTN (steps, topk, draft tokens, tied: one [[configs]] each) and
    NGRAM (its draft tokens in [space]), named as methods: `{method_args}` in SGLang's own
    command carries the algorithm and the knobs, every other flag stays as written."""
    found = engine_method("sglang", launch.method or "")
    if found is None or found.name in LEGACY:
        known = ", ".join(
            m.spelled["sglang"] or m.name for m in METHODS.values() if m.spelled.get("sglang")
        )
        raise UserError(
            f"SGLang's {launch.method} is not one of ddtune's methods ({known}): sweep init "
            "cannot write a spec whose readiness check would pass; write the spec by hand"
        )
    fields = {k: SGLANG_FLAGS[k][2:].replace("-", "_") for k in found.engine_knobs["sglang"]}
    current: dict[str, Any] = {
        knob: launch.drafter if knob == DRAFTER else launch.knobs.get(field)
        for knob, field in fields.items()
    }
    current = {k: v for k, v in current.items() if v is not None}
    subs = {"model_path": "{model}", "port": "{port}"}
    if "host" in launch.spans and launch.host not in WILDCARD_HOSTS:
        subs["host"] = "{host}"
    spelled = ["speculative_algorithm", *(fields[k] for k in current)]
    argv = launch.spliced(subs, spelled, METHOD_ARGS)
    choice = SpaceChoice(
        [launch.python, "-m", "sglang.launch_server", *argv], {"model": launch.model}
    )
    eagle = ("num_steps", "topk", "num_draft_tokens")
    if all(k in current for k in eagle):
        fixed = {k: v for k, v in current.items() if k not in eagle}
        choice.configs = [
            {"method": found.name, **knobs, **fixed}
            for knobs in _eagle_configs(*(current[k] for k in eagle))
        ]
    elif found.name == "ngram" and "num_draft_tokens" in current:
        axes = {**current, "num_draft_tokens": around(current["num_draft_tokens"])}
        choice.space = {"method": [found.name], found.name: axes}
    else:
        raise UserError(
            f"the SGLang command runs {launch.method} without the knobs to sweep "
            "(--speculative-num-steps, --speculative-eagle-topk, --speculative-num-draft-tokens)"
        )
    choice.baseline = {"method": found.name, **current}
    choice.notes.append(_method_note(f"SGLang's {launch.method}", found.name))
    return choice


def _method_note(running: str, name: str) -> str:
    return (
        f"{running} is ddtune's method {name}: {{method_args}} in the command becomes each "
        "config's speculative flags, and readiness reads them back from the running server"
    )


def _eagle_configs(steps: int, topk: int, tokens: int) -> Iterable[dict[str, int]]:
    """Steps around the current, topk and its neighbours; draft tokens as SGLang ties them
    (topk 1: steps + 1; otherwise the current, at least steps + 1, at most steps * topk + 1)."""
    for s in around(steps, side=2, high=32):
        for k in around(topk, side=1, high=MAX_TOPK):
            tokens_for = s + 1 if k == 1 else min(max(tokens, s + 1), s * k + 1)
            yield {"num_steps": s, "topk": k, "num_draft_tokens": tokens_for}


def _vllm_method(launch: ParsedLaunch, block_size: int | None) -> SpaceChoice:
    """vLLM's `--speculative-config` as a method: its token count around the current value
    (DFlash: at most the drafter's block), the other knobs as written, `{method_args}` in
    the command; a config ddtune's methods cannot spell keeps the variable K instead."""
    try:
        config = vllm_method_config(launch.speculative_config)
    except UserError as exc:
        choice = _vllm_template(launch, block_size)
        choice.notes.insert(0, f"{exc}: it stays written in the command, with the variable K")
        return choice
    knob = token_knob(config.name)
    current = dict(config.knobs)
    choice = SpaceChoice(_vllm_command(launch, METHOD_ARGS), {"model": launch.model})
    choice.baseline = {"method": config.name, **current}
    axes: dict[str, Any] = dict(current)
    if knob is not None and isinstance(current.get(knob), int):
        spec = config.method.knob(knob)
        high = spec.high if spec else 1 << 30
        if knob == "block_size" and block_size is not None:
            high = min(high, block_size)  # DFlash drafts at most block_size - 1 tokens
        value = int(current[knob])
        low = spec.low if spec else 1
        axes[knob] = around(value, low=low, high=max(high, value))
    choice.space = {"method": [config.name], config.name: axes}
    choice.notes.append(_method_note(f"vLLM's {launch.method}", config.name))
    if config.name == "dflash":
        running = current.get("block_size")
        choice.notes += _block_note(block_size, running if isinstance(running, int) else None)
    return choice


def _vllm_command(launch: ParsedLaunch, speculative: str) -> list[str]:
    """vLLM's command with `{model}`, `{port}`, `{host}` and the speculative config as given
    (`{method_args}`: the whole `--speculative-config` flag)."""
    subs = {"port": "{port}"}
    if not launch.positional_model:
        subs["model"] = "{model}"
    if "host" in launch.spans and launch.host not in WILDCARD_HOSTS:
        subs["host"] = "{host}"
    if speculative == METHOD_ARGS:
        args = launch.spliced(subs, ["speculative_config"], METHOD_ARGS)
    else:
        args = launch.template({**subs, "speculative_config": speculative})
    if launch.positional_model:
        args = ["--model", "{model}", *args]
    return [launch.python, "-m", "vllm.entrypoints.openai.api_server", *args]


def _vllm_template(launch: ParsedLaunch, block_size: int | None) -> SpaceChoice:
    """vLLM: `num_speculative_tokens` as the variable K inside `--speculative-config`."""
    config = dict(launch.speculative_config)
    current = int(config.get("num_speculative_tokens", 1))
    high = 1 << 30
    if launch.method == "dflash" and block_size is not None:
        high = block_size - 1  # DFlash drafts at most block_size - 1 tokens after the bonus
    values = around(current, high=max(high, current))
    command = _vllm_command(launch, _config_template(config))
    variables: dict[str, Any] = {"model": launch.model, "K": current}
    if launch.drafter:
        variables["drafter"] = launch.drafter
    choice = SpaceChoice(command, variables, space={"mode": ["ar"], "vars": {"K": values}})
    choice.baseline = {"mode": "ar", "vars": {"K": current}}
    if launch.method == "dflash":
        choice.notes += _block_note(block_size)
    return choice


def _config_template(config: dict[str, Any]) -> str:
    """The JSON with `num_speculative_tokens` -> {K} and the drafter -> {drafter}."""
    marks = {"num_speculative_tokens": "@@K@@"}
    if isinstance(config.get("model"), str):
        marks["model"] = "@@drafter@@"
    text = escape(json.dumps({**config, **marks}, separators=(",", ":")))
    return text.replace('"@@K@@"', "{K}").replace("@@drafter@@", "{drafter}")


def ddtree_around(
    launch: ParsedLaunch, env: dict[str, str]
) -> tuple[dict[str, list[int]], dict[str, int]]:
    """SGLang DDTree's budget and top-k around the running ones: (axes, running values)."""
    budget = launch.knobs.get("speculative_ddtree_budget", 16)
    topk = env_int(env, TOPK_ENV, SGLANG_DEFAULT_TOPK)
    axes = {
        "budget": around(budget, step=max(1, budget // 4), high=MAX_BUDGET),
        "topk": around(topk, side=1, high=MAX_TOPK),
    }
    return axes, {"budget": budget, "topk": topk}


def ddtree_knobs(env: dict[str, str]) -> dict[str, float | bool]:
    """The DDTree knobs the service's environment sets (SGLANG_DDTREE_DEPTH_BONUS, ...)."""
    found = {key: parse_knob(key, env.get(name)) for key, name in KNOB_ENV.items()}
    return {key: value for key, value in found.items() if value is not None}


def env_int(env: dict[str, str], name: str, default: int) -> int:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return default


__all__ = [
    "SpaceChoice",
    "around",
    "ddtree_around",
    "ddtree_knobs",
    "env_int",
    "method_space",
    "windows_around",
]
