"""`ddtune serve`: register the subcommand and hand the flags to `lifecycle.serve`.

See docs/server.md "Server". Flags are turned into the same wire form as
the TOML file (`--window 32|none` → `32|"none"`) and override it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

from ddtune.extras import require_engine
from ddtune.params import MODES, parse_window, window_to_wire
from ddtune.server.config import ServeConfig

SETTING_FLAGS = (
    "target",
    "drafter",
    "mode",
    "budget",
    "topk",
    "window",
    "host",
    "port",
    "max_queue",
    "max_batch",
    "max_step_tokens",
    "grace_seconds",
    "model_name",
    "max_request_bytes",
    "body_timeout_seconds",
    "strict_requests",
    "schedule",
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """`ddtune serve`: model and decoding flags, network flags, limits."""
    p = subparsers.add_parser(
        "serve",
        help="OpenAI-compatible DDTree server (identity, health, metrics, hot reconfigure)",
        description="Serve one model over an OpenAI-compatible HTTP API. Prints one line "
        "'ready instance_id=<id> port=<port>' on stdout once it can serve.",
    )
    _model_flags(p)
    _network_flags(p)
    _limit_flags(p)
    p.set_defaults(func=run)


def _model_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", type=Path, help="target model folder (default: bundled)")
    p.add_argument(
        "--drafter",
        type=Path,
        help="DFlash drafter folder (default: bundled, only when --target is not given)",
    )
    p.add_argument("--mode", choices=MODES, help="default: ddtree")
    p.add_argument("--budget", type=int, help="tree node budget (default: 16)")
    p.add_argument("--topk", type=int, help="per-depth branching cap (default: 4)")
    p.add_argument("--window", help="drafter context window W or 'none' (default: none)")
    p.add_argument(
        "--schedule",
        type=Path,
        help="JSON schedule (a sweep report's results.json or schedule.json): each request "
        "runs the config of the range holding the requests in flight when it starts",
    )
    p.add_argument("--model-name", help="served model id (default: the target folder's name)")
    p.add_argument("--config", type=Path, help="TOML file with any of these settings")


def _network_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", help="listen address (default: 127.0.0.1)")
    p.add_argument("--port", type=int, help="listen port, 0 = any free one (default: 8000)")
    p.add_argument(
        "--grace-seconds",
        type=float,
        help="SIGTERM: time to finish in-flight requests (default: 10)",
    )


def _limit_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-queue", type=int, help="waiting requests before 503 (default: 64)")
    p.add_argument(
        "--max-batch",
        type=int,
        help="requests decoded together in one round, 1 = one at a time (default: 8)",
    )
    p.add_argument(
        "--max-step-tokens",
        type=int,
        help="token budget of one step: every running request's tree + root plus prefill "
        "(default: 2048)",
    )
    p.add_argument(
        "--max-request-bytes",
        type=int,
        help="largest request body; a bigger one is answered 413 at once and the rest of it "
        "read and dropped (default: 4194304 = 4 MiB)",
    )
    p.add_argument(
        "--body-timeout-seconds",
        type=float,
        help="a request body must arrive within this, else 408 (default: 30)",
    )
    p.add_argument(
        "--strict-requests",
        action="store_true",
        default=None,
        help="unknown request fields are a 400 (default: accepted, named in the "
        "ddtune-ignored-fields header and the log)",
    )


def run(args: argparse.Namespace) -> int:
    # Record SIGTERM/SIGINT from here on (imports take a while); the server drains on them.
    early: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: early.append(signum))
    require_engine()  # before the server starts: the hint, not a failed startup
    from ddtune.server.lifecycle import serve  # uvicorn/fastapi only when serving

    config = ServeConfig.from_toml(args.config) if args.config else ServeConfig()
    code = serve(config.with_overrides(flag_settings(args)), early)
    exit_now(code)


def exit_now(code: int) -> NoReturn:
    """Exit without the interpreter's teardown once the server has fully drained.

    Every response is sent, the worker joined and the socket closed by now;
    what is left is tearing down torch's modules, which takes ~1 s of CPU on
    2 cores (measured: `import torch` then exit, 3.4 s vs 2.4 s with
    `os._exit`). A sweep pays that on every restart, so flush and leave.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def flag_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given as flags, in wire form (None = not given)."""
    settings = {key: getattr(args, key) for key in SETTING_FLAGS}
    if args.window is not None:
        settings["window"] = window_to_wire(parse_window(args.window))
    return settings
