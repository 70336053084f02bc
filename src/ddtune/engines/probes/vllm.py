"""vLLM's own argument check; runs in vLLM's Python (sent by `probe_source("vllm")`).

`check(args, env, check_env)` takes what follows
`python -m vllm.entrypoints.openai.api_server` through what the server does
before it builds an engine (vllm 0.32: `entrypoints/launchers/api_server/entry.py`):

    argparse   make_arg_parser(FlexibleArgumentParser()).parse_args(args): vLLM's CLI,
               `--speculative-config` JSON included (a refusal is the `error:` line)
    validate   validate_parsed_serve_args(args)
    engine     AsyncEngineArgs.from_cli_args(args).create_engine_config(): the model's
               and the drafter's config.json, the platform, and SpeculativeConfig's own
               validation (method, num_speculative_tokens, the draft model)
    env        each variable of `check_env` is one vLLM defines (vllm.envs)

`create_engine_config` reads configs only: no weights are loaded and no
worker is started. Each check runs with `env` over the probe's own
environment (vLLM reads e.g. VLLM_CPU_KVCACHE_SPACE while building the config).
"""

from __future__ import annotations

import argparse
import contextlib
import io
from typing import Any

from ddtune.engines.probes.protocol import argparse_error, checker, parser_info, refused, version_of

ENGINE = "vllm"


def engine_info() -> dict[str, Any]:
    """Version, and every option string of vLLM's server parser with its destination."""
    return parser_info(ENGINE, _parser())


def _parser() -> argparse.ArgumentParser:
    from vllm.entrypoints.launchers.cli_args import (
        make_arg_parser,
    )
    from vllm.entrypoints.serve.utils.api_utils import (
        cli_env_setup,
    )
    from vllm.utils.argparse_utils import (
        FlexibleArgumentParser,
    )

    cli_env_setup()
    parser: argparse.ArgumentParser = make_arg_parser(FlexibleArgumentParser(prog="vllm"))
    return parser


def _parse(args: list[str]) -> dict[str, Any]:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.launchers.cli_args import (
        validate_parsed_serve_args,
    )
    from vllm.usage.usage_lib import UsageContext

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parsed = _parser().parse_args(list(args))
    except SystemExit:
        return refused("argparse", argparse_error(err.getvalue()))
    stage = "validate"
    try:
        validate_parsed_serve_args(parsed)
        stage = "engine"
        engine_args = AsyncEngineArgs.from_cli_args(parsed)
        engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
    except Exception as exc:
        return refused(stage, exc)
    return {"accepted": True, "stage": "ok"}


def _check_env(env: dict[str, str], names: list[str]) -> dict[str, Any] | None:
    """Refuse a variable vLLM does not define: it would be ignored."""
    import vllm.envs as envs

    known = getattr(envs, "environment_variables", None)
    if not isinstance(known, dict):
        return None
    for name in names:
        if name.startswith("VLLM_") and name not in known:
            message = f"vLLM {version_of(ENGINE)} defines no environment variable {name}"
            return refused("env", message + ": it would be ignored", name)
    return None


check = checker(_parse, _check_env)  # one launch command: accepted, or vLLM's own message
