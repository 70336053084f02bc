"""SGLang's own argument check; runs in SGLang's Python (sent by `probe_source("sglang")`).

`check(args, env, check_env)` takes what follows `python -m sglang.launch_server`
through the stages the launcher itself runs before it starts any process
(sglang 0.5.23: `launch_server.py` -> `run_server`):

    argparse  sglang.srt.server_args.prepare_server_args(args): SGLang's parser
              (a refusal is argparse's `error:` line; the launcher exits 2 on it)
    resolve   ServerArgs.resolve_once(): reads <model-path>/config.json and the
              drafter's, checks platform, device and the speculative settings
    check     ServerArgs.check_server_args()
    env       each SGLANG_* variable of `check_env` (the ones ddtune sets from
              parameters, e.g. SGLANG_DDTREE_MAX_TOPK) is one SGLang defines
              (sglang.srt.environ.Envs) and its value parses

Older releases validate inside `prepare_server_args` (ServerArgs.__post_init__);
`resolve_once` and `check_server_args` are called where they exist. No model
is loaded and no process started: a local model folder with its config.json
is all resolution reads. Each check runs with `env` over the probe's own
environment (restored afterwards).
"""

from __future__ import annotations

import argparse
import contextlib
import io
from typing import Any

from ddtune.engines.probes.protocol import argparse_error, checker, parser_info, refused, version_of

ENGINE = "sglang"


def engine_info() -> dict[str, Any]:
    """Version, and every option string of SGLang's parser with its destination field."""
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser_info(ENGINE, parser)


def _parse(args: list[str]) -> dict[str, Any]:
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import prepare_server_args

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            load_plugins()  # launch_server does this before parsing
            server_args = prepare_server_args(list(args))
    except SystemExit:
        return refused("argparse", argparse_error(err.getvalue()))
    except Exception as exc:  # older releases validate in ServerArgs.__post_init__
        return refused("argparse", exc)
    for stage, method in (("resolve", "resolve_once"), ("check", "check_server_args")):
        step = getattr(server_args, method, None)
        try:
            if step is not None:
                step()
        except Exception as exc:
            return refused(stage, exc)
    return {"accepted": True, "stage": "ok"}


def _check_env(env: dict[str, str], names: list[str]) -> dict[str, Any] | None:
    """Refuse a variable SGLang does not define (it would be ignored) or cannot parse."""
    try:
        from sglang.srt.environ import EnvField, Envs
    except ImportError:
        return None  # an SGLang without the registry: nothing to check against
    for name in (n for n in names if n.startswith("SGLANG_")):
        field = vars(Envs).get(name)
        if not isinstance(field, EnvField):
            message = (
                f"SGLang {version_of(ENGINE)} defines no environment variable {name} "
                "(sglang.srt.environ.Envs): it would be ignored"
            )
            return refused("env", message, name)
        try:
            field.parse(env.get(name, ""))
        except ValueError as exc:
            return refused("env", f"{name}: {exc}", name)
    return None


check = checker(_parse, _check_env)  # one launch command: accepted, or SGLang's own message
