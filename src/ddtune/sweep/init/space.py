"""The space around a service's current speculative config: ONE function per the method.

    choice = method_space(launch, block_size, front)   # SpaceChoice: command, space, baseline

`method_space` maps (method, knobs) to what the spec sweeps. Methods the
decoding parameters name (SGLang DDTREE and DFLASH: `mode`, `budget`,
`topk`, `window`) run through ddtune's launcher (`python -m
ddtune.launchers sglang`), which leaves out the window flag for "none" and
sets SGLANG_DDTREE_MAX_TOPK from `topk`. Every other method (SGLang EAGLE,
EAGLE3, NEXTN, NGRAM; vLLM's `--speculative-config` methods) is swept the way
the examples do it: its knobs are user variables templated into the engine's
own command (`[space] vars`, or `[[configs]]` where the engine ties knobs
together), with `mode = "ar"` for ddtune's own parameters. When the
speculative-methods vocabulary lands, this function is the one place to
re-point.

Around the current value: the budget with two more values on each side, the
top-k and its neighbours, the current window with "none" and a smaller one,
and a chain length (draft tokens) with two more on each side where the
drafter's block allows (a DFlash drafter drafts at most `block_size` tokens).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ddtune.errors import UserError
from ddtune.kinds.sglang import KNOB_ENV, TOPK_ENV
from ddtune.params import MAX_BUDGET, MAX_TOPK, parse_knob
from ddtune.sweep.init.parse import ParsedLaunch, escape

SGLANG_DEFAULT_TOPK = 6  # the DDTree pull request's default when the variable is unset
DEFAULT_WINDOW = 2048  # the finite window tried beside "none" when the service runs none
WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]")
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "MTP", "STANDALONE")
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
        return _sglang_template(launch, block_size)
    return _vllm_template(launch, block_size)


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
    window = launch.knobs.get("speculative_draft_window_size") or launch.knobs.get(
        "speculative_dflash_draft_window_size"
    )
    windows = windows_around(window, context)
    command = [front, "-m", "ddtune.launchers", "sglang", "--python", launch.python]
    command += ["--model-path", "{model}", "--draft-model-path", "{drafter}", "--mode", "{mode}"]
    baseline: dict[str, Any] = {"mode": mode, "window": window or "none"}
    space: dict[str, Any] = {"mode": [mode], "window": windows}
    choice = SpaceChoice(command, {"model": launch.model, "drafter": launch.drafter})
    if mode == "ddtree":
        budget = launch.knobs.get("speculative_ddtree_budget", 16)
        topk = _int_env(env, TOPK_ENV, SGLANG_DEFAULT_TOPK)
        space["budget"] = around(budget, step=max(1, budget // 4), high=MAX_BUDGET)
        space["topk"] = around(topk, side=1, high=MAX_TOPK)
        baseline.update(budget=budget, topk=topk)
        command += ["--budget", "{budget}", "--topk", "{topk}"]
        knobs = _ddtree_knobs(env)
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
    choice.notes += _block_note(block_size)
    return [*extra, "--speculative-num-draft-tokens", "{draft_tokens}"], current


def _block_note(block_size: int | None) -> list[str]:
    if block_size is None:
        return ["the drafter's block size could not be read: chain lengths are not capped by it"]
    return [f"the drafter's block is {block_size} tokens: chain lengths stop there"]


def _sglang_template(launch: ParsedLaunch, block_size: int | None) -> SpaceChoice:
    """EAGLE / EAGLE3 / NEXTN (steps, topk, draft tokens, tied: explicit configs), NGRAM."""
    subs = {"model_path": "{model}", "port": "{port}"}
    if "host" in launch.spans and launch.host not in WILDCARD_HOSTS:
        subs["host"] = "{host}"
    knobs = launch.knobs
    steps = knobs.get("speculative_num_steps")
    topk = knobs.get("speculative_eagle_topk")
    tokens = knobs.get("speculative_num_draft_tokens")
    configs: list[dict[str, Any]] = []
    if launch.method in EAGLE_FAMILY and steps is not None and topk is not None and tokens:
        subs.update(
            speculative_num_steps="{steps}",
            speculative_eagle_topk="{eagle_topk}",
            speculative_num_draft_tokens="{draft_tokens}",
        )
        configs = [{"mode": "ar", "vars": v} for v in _eagle_configs(steps, topk, tokens)]
        baseline_vars = {"steps": steps, "eagle_topk": topk, "draft_tokens": tokens}
    elif tokens:
        subs["speculative_num_draft_tokens"] = "{draft_tokens}"
        configs = [{"mode": "ar", "vars": {"draft_tokens": t}} for t in around(tokens)]
        baseline_vars = {"draft_tokens": tokens}
    else:
        raise UserError(
            f"the SGLang command runs {launch.method} without the knobs to sweep "
            "(--speculative-num-steps, --speculative-eagle-topk, --speculative-num-draft-tokens)"
        )
    command = [launch.python, "-m", "sglang.launch_server", *launch.template(subs)]
    choice = SpaceChoice(command, {"model": launch.model, **baseline_vars})
    choice.configs = configs
    choice.baseline = {"mode": "ar", "vars": baseline_vars}
    choice.notes.append(
        f"{launch.method} is not one of ddtune's modes: its knobs are user variables "
        "in SGLang's own command, each [[configs]] one consistent setting"
    )
    choice.notes.append(
        f'with mode = "ar", SGLang\'s readiness check expects no speculative algorithm and '
        f"refuses a running {launch.method} server as a config mismatch until ddtune's "
        "modes name it: `ddtune sweep canary` shows this in two starts"
    )
    return choice


def _eagle_configs(steps: int, topk: int, tokens: int) -> Iterable[dict[str, int]]:
    """Steps around the current, topk and its neighbours; draft tokens as SGLang ties them
    (topk 1: steps + 1; otherwise the current, at least steps + 1, at most steps * topk + 1)."""
    for s in around(steps, side=2, high=32):
        for k in around(topk, side=1, high=MAX_TOPK):
            if k == 1:
                yield {"steps": s, "eagle_topk": 1, "draft_tokens": s + 1}
            else:
                yield {
                    "steps": s,
                    "eagle_topk": k,
                    "draft_tokens": min(max(tokens, s + 1), s * k + 1),
                }


def _vllm_template(launch: ParsedLaunch, block_size: int | None) -> SpaceChoice:
    """vLLM: `num_speculative_tokens` as the variable K inside `--speculative-config`."""
    config = dict(launch.speculative_config)
    current = int(config.get("num_speculative_tokens", 1))
    high = 1 << 30
    if launch.method == "dflash" and block_size is not None:
        high = block_size - 1  # DFlash drafts at most block_size - 1 tokens after the bonus
    values = around(current, high=max(high, current))
    subs = {"speculative_config": _config_template(config), "port": "{port}"}
    if not launch.positional_model:
        subs["model"] = "{model}"
    if "host" in launch.spans and launch.host not in WILDCARD_HOSTS:
        subs["host"] = "{host}"
    args = launch.template(subs)
    if launch.positional_model:
        args = ["--model", "{model}", *args]
    command = [launch.python, "-m", "vllm.entrypoints.openai.api_server", *args]
    variables: dict[str, Any] = {"model": launch.model, "K": current}
    if launch.drafter:
        variables["drafter"] = launch.drafter
    choice = SpaceChoice(command, variables, space={"mode": ["ar"], "vars": {"K": values}})
    choice.baseline = {"mode": "ar", "vars": {"K": current}}
    choice.notes.append(
        f"vLLM's {launch.method} is not one of ddtune's modes: num_speculative_tokens is the "
        "variable K inside --speculative-config"
    )
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


def _ddtree_knobs(env: dict[str, str]) -> dict[str, float | bool]:
    """The DDTree knobs the service's environment sets (SGLANG_DDTREE_DEPTH_BONUS, ...)."""
    found = {key: parse_knob(key, env.get(name)) for key, name in KNOB_ENV.items()}
    return {key: value for key, value in found.items() if value is not None}


def _int_env(env: dict[str, str], name: str, default: int) -> int:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return default


__all__ = ["SpaceChoice", "around", "method_space", "windows_around"]
