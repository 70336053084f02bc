"""A schedule as a launch command: what each engine runs to switch configs by concurrency.

    launch = scheduled_launch(spec, schedule, folder, typical=4)
    launch.tier      # the config readiness checks the new server against
    launch.argv      # the command: the tier's own, extended as the engine takes a schedule
    launch.files     # files the command reads (written before the restart), path -> text
    launch.words     # what runs, in the user's words (with why, where the engine cannot switch)

By the service's engine (`ddtune.engines.schedule` renders the engine's fields):

    ddtune   the first range's config, plus `--schedule FILE` (the schedule as JSON)
    vllm     the drafting config with the largest token count, its `--speculative-config`
             JSON extended by `num_speculative_tokens_per_batch_size`
    sglang   the EAGLE/EAGLE3 config with the most steps, plus `--speculative-adaptive
             --speculative-adaptive-config FILE`

Where the engine cannot take the schedule (another method, knobs other than the
token count, no `--speculative-config` argument, engine openai), the command
serves the config for the typical concurrency alone, said as such. Files are
named by their content's hash, so a drop-in kept for `--revert` still finds
the schedule it was written with.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddtune.engines.schedule import Schedule, Tier, sglang_adaptive, token_count, vllm_schedule
from ddtune.services.spec import ServiceSpec

FILE_PREFIX = "ddtune-schedule-"
SPECULATIVE_CONFIG = ("--speculative-config", "--speculative_config")


@dataclass
class ScheduledLaunch:
    tier: Tier
    argv: list[str]
    words: str
    files: dict[Path, str] = field(default_factory=dict)
    switches: bool = True  # False: one config runs (the engine cannot take the schedule)


def scheduled_launch(
    spec: ServiceSpec, schedule: Schedule, folder: Path, typical: int = 1
) -> ScheduledLaunch:
    """The command that serves `schedule` on `spec`'s engine (see the module docstring)."""
    if spec.engine == "ddtune":
        return _ddtune(spec, schedule, folder)
    if spec.engine == "vllm":
        return _vllm(spec, schedule, typical)
    if spec.engine == "sglang":
        return _sglang(spec, schedule, folder, typical)
    return _single(spec, schedule, typical, f"engine {spec.engine!r} has no schedule")


def _ddtune(spec: ServiceSpec, schedule: Schedule, folder: Path) -> ScheduledLaunch:
    tier = schedule.tiers[0]
    path, text = _file(folder, {"schedule": schedule.to_wire()})
    argv = [*_argv(spec, tier), "--schedule", str(path)]
    words = f"ddtune serve switches by requests in flight: {schedule.describe()}"
    return ScheduledLaunch(tier, argv, words, {path: text})


def _vllm(spec: ServiceSpec, schedule: Schedule, typical: int) -> ScheduledLaunch:
    rendered = vllm_schedule(schedule)
    if rendered.fields is None or rendered.base is None:
        return _single(spec, schedule, typical, f"vLLM cannot take it: {rendered.reason}")
    mismatch = _vllm_commands_differ(spec, schedule)
    if mismatch:
        return _single(spec, schedule, typical, f"vLLM cannot take it: {mismatch}")
    merged = merge_speculative_config(_argv(spec, rendered.base), rendered.fields)
    if merged is None:
        why = "vLLM cannot take it: the command has no --speculative-config JSON to extend"
        return _single(spec, schedule, typical, why)
    ranges = rendered.fields["num_speculative_tokens_per_batch_size"]
    words = f"vLLM switches the token count by batch size: {ranges} ([first, last, K])"
    return ScheduledLaunch(rendered.base, merged, words)


def _vllm_commands_differ(spec: ServiceSpec, schedule: Schedule) -> str | None:
    """Why the drafting tiers' commands are not one speculative config but for its token
    count (their `num_speculative_tokens` must be the tier's token count); None if they are."""
    shared: dict[str, Any] | None = None
    for tier in schedule.tiers:
        count = token_count(tier)
        if not count:
            continue
        found = speculative_config(_argv(spec, tier))
        if found is None or found.get("num_speculative_tokens") != count:
            return f"{tier.label()}'s --speculative-config does not draft its {count} tokens"
        rest = {k: v for k, v in found.items() if k != "num_speculative_tokens"}
        if shared is not None and rest != shared:
            return f"the speculative configs differ in more than the token count ({tier.label()})"
        shared = rest
    return None


def _sglang(spec: ServiceSpec, schedule: Schedule, folder: Path, typical: int) -> ScheduledLaunch:
    rendered = sglang_adaptive(schedule)
    if rendered.fields is None or rendered.base is None:
        return _single(spec, schedule, typical, f"SGLang cannot take it: {rendered.reason}")
    path, text = _file(folder, rendered.fields["speculative_adaptive_config"])
    argv = [
        *_argv(spec, rendered.base),
        "--speculative-adaptive",
        "--speculative-adaptive-config",
        str(path),
    ]
    words = f"SGLang adapts the steps per batch-size tier: {text.strip()}"
    return ScheduledLaunch(rendered.base, argv, words, {path: text})


def _single(spec: ServiceSpec, schedule: Schedule, typical: int, why: str) -> ScheduledLaunch:
    tier = schedule.pick(typical)
    words = (
        f"{why}; serving {tier.label()} alone, the config for {typical} concurrent requests "
        "(the typical concurrency)"
    )
    if schedule.is_single:
        words = f"one config: {tier.label()}"
    return ScheduledLaunch(tier, _argv(spec, tier), words, switches=False)


def speculative_config(argv: list[str]) -> dict[str, Any] | None:
    """The `--speculative-config` JSON object of a vLLM command (None: none, or not JSON)."""
    found = _find_speculative_config(argv)
    return None if found is None else found[2]


def merge_speculative_config(argv: list[str], fields: dict[str, Any]) -> list[str] | None:
    """`argv` with `fields` merged into its `--speculative-config` JSON (None: there is none)."""
    found = _find_speculative_config(argv)
    if found is None:
        return None
    at, name, config = found
    merged = json.dumps({**config, **fields}, separators=(",", ":"))
    out = list(argv)
    out[at] = merged if at > 0 and out[at - 1] == name else f"{name}={merged}"
    return out


def _find_speculative_config(argv: list[str]) -> tuple[int, str, dict[str, Any]] | None:
    """(index of the JSON's argument, the flag's spelling, the JSON object)."""
    for i, arg in enumerate(argv):
        name, eq, inline = arg.partition("=")
        if name not in SPECULATIVE_CONFIG:
            continue
        at, text = (i, inline) if eq else (i + 1, argv[i + 1] if i + 1 < len(argv) else "")
        try:
            config = json.loads(text)
        except ValueError:
            return None
        return (at, name, config) if isinstance(config, dict) else None
    return None


def _argv(spec: ServiceSpec, tier: Tier) -> list[str]:
    return spec.render_argv(tier.params, tier.vars)


def _file(folder: Path, data: Any) -> tuple[Path, str]:
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return folder / f"{FILE_PREFIX}{digest}.json", text


__all__ = [
    "FILE_PREFIX",
    "ScheduledLaunch",
    "merge_speculative_config",
    "scheduled_launch",
    "speculative_config",
]
