"""The model folders a service loads, as its launch command (or systemd unit) names them.

    served = served_models(spec.service, params, user_vars, base_dir)
    served.target, served.drafter       # Paths, or None where the command names none
    served.trust_remote_code            # the command passes --trust-remote-code

The command is the one a trial would run (placeholders filled in). Where it
names the target: `--model`/`--model-path` (vLLM, SGLang, ddtune's launchers),
`--target` (`ddtune serve`, which loads the bundled models without one),
`serve MODEL` (vLLM's entry point). The drafter: `--drafter`,
`--draft-model-path`, `--speculative-draft-model-path`, `--speculative-model`,
or the `model` of vLLM's `--speculative-config` JSON. A systemd service without
a command in the spec is read from its unit file's `ExecStart`. Relative paths
are taken from the service's working folder. `ddtune trace record --spec` traces
these folders; `sweep plan`/`sweep run` check a trace against them.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddtune.params import DecodeParams
from ddtune.services.spec import ServiceSpec

TARGET_FLAGS = ("--model", "--model-path", "--target")
DRAFTER_FLAGS = (
    "--drafter",
    "--draft-model-path",
    "--speculative-draft-model-path",
    "--speculative-model",
)
SPECULATIVE_JSON = "--speculative-config"
TRUST_REMOTE_CODE = "--trust-remote-code"


@dataclass(frozen=True)
class ServedModels:
    """What one service command loads, and where that was read."""

    target: Path | None
    drafter: Path | None
    trust_remote_code: bool
    source: str  # "the service command", "unit X's ExecStart"
    dtype: str | None = None  # what it computes in: float32, bfloat16, float16 (None: unknown)


def served_models(
    service: ServiceSpec,
    params: DecodeParams,
    user_vars: Mapping[str, Any] | None = None,
    base_dir: Path | None = None,
) -> ServedModels:
    """The model folders of the service's command for one config (None where it names none)."""
    argv, source = _argv(service, params, user_vars)
    where = Path(service.cwd or base_dir or ".")
    target = flag_value(argv, TARGET_FLAGS) or _positional_model(argv)
    drafter = flag_value(argv, DRAFTER_FLAGS) or _speculative_model(argv)
    if target is None and service.engine == "ddtune" and "serve" in argv:
        from ddtune import assets

        target, drafter = str(assets.default_target_dir()), str(assets.default_drafter_dir())
    target_dir = _resolved(target, where)
    return ServedModels(
        target_dir,
        _resolved(drafter, where),
        any(a == TRUST_REMOTE_CODE or a.startswith(TRUST_REMOTE_CODE + "=") for a in argv),
        source,
        served_dtype(argv, service.engine, target_dir),
    )


DTYPE_WORDS = {"half": "float16", "float": "float32", "bf16": "bfloat16", "fp16": "float16"}


def served_dtype(argv: list[str], engine: str, target: Path | None) -> str | None:
    """The dtype the command computes in: its `--dtype`, else (SGLang, vLLM: "auto") the
    checkpoint's own `torch_dtype`, else ddtune serve's float32; None where it cannot tell."""
    named = flag_value(argv, ("--dtype",))
    if named is not None and named != "auto":
        return DTYPE_WORDS.get(named, named)
    if engine == "ddtune":
        return "float32"
    if engine not in ("sglang", "vllm") or target is None:
        return None
    try:
        config = json.loads((target / "config.json").read_text())
    except (OSError, ValueError):
        return None
    own = config.get("torch_dtype") or config.get("dtype") if isinstance(config, dict) else None
    return DTYPE_WORDS.get(own, own) if isinstance(own, str) else None


def _argv(
    service: ServiceSpec, params: DecodeParams, user_vars: Mapping[str, Any] | None
) -> tuple[list[str], str]:
    if service.command:
        return service.render_argv(params, user_vars), "the service command"
    if service.control == "systemd" and service.unit:
        path = Path(service.systemd_dir) / service.unit
        return unit_exec_start(path), f"{path}'s ExecStart"
    return [], "the service (no command)"


def unit_exec_start(path: Path) -> list[str]:
    """The argv of a unit file's first `ExecStart=` ([] when the file cannot be read)."""
    try:
        text = path.read_text()
    except OSError:
        return []
    joined = text.replace("\\\n", " ")
    for line in joined.splitlines():
        key, _, value = line.strip().partition("=")
        if key.strip() == "ExecStart" and value.strip():
            try:
                argv = shlex.split(value.strip().lstrip("-@:+!"))
            except ValueError:
                return []
            return argv
    return []


def flag_value(argv: Sequence[str], flags: Sequence[str]) -> str | None:
    """The value of the last of `flags` in argv (`--flag V` or `--flag=V`)."""
    found = None
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in flags:
            if eq:
                found = value
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                found = argv[i + 1]
    return found or None


def _positional_model(argv: Sequence[str]) -> str | None:
    """vLLM's `vllm serve MODEL ...`: the argument after `serve` when it is not a flag."""
    for i, arg in enumerate(argv[:-1]):
        if Path(arg).name == "vllm" and argv[i + 1] == "serve":
            following = argv[i + 2] if i + 2 < len(argv) else "--"
            return None if following.startswith("-") else following
    return None


def _speculative_model(argv: Sequence[str]) -> str | None:
    text = flag_value(argv, (SPECULATIVE_JSON,))
    if text is None:
        return None
    try:
        config = json.loads(text)
    except ValueError:
        return None
    model = config.get("model") if isinstance(config, dict) else None
    return model if isinstance(model, str) and model else None


def _resolved(path: str | None, where: Path) -> Path | None:
    if path is None:
        return None
    found = Path(path).expanduser()
    if found.is_absolute() or not (where / found).exists():
        return found  # a hub id ("org/name") stays as written
    return where / found


__all__ = ["ServedModels", "flag_value", "served_models", "unit_exec_start"]
