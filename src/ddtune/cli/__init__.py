"""The `ddtune` command: a thin argparse front, one small module per command group.

`COMMANDS` is the subcommand table: each line maps a command group to the
module of this folder that adds its parser (`register(subparsers)`) and runs
it (the parser sets `func`, which takes the parsed args and returns an exit
code). Modules are imported only to register; heavy imports (torch) live
inside the handlers so that `ddtune --help` stays instant and works without
the `ddtune[engine]` extra.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from pydantic import ValidationError

from ddtune.errors import UserError
from ddtune.extras import engine_hint, missing_engine_module
from ddtune.tables import validation_to_user_error

COMMANDS: dict[str, str] = {
    "generate": "ddtune.cli.generate",  # one request with the own engine
    "bench-engine": "ddtune.cli.bench_engine",  # AR vs DFlash vs DDTree, in process
    "train": "ddtune.cli.train",  # train tokenizer|tasks|target|drafter|eval
    "serve": "ddtune.cli.serve",  # the OpenAI server
    "bench": "ddtune.cli.bench",  # a benchmark matrix against a URL
    "sweep": "ddtune.cli.sweep",  # sweep run|plan|canary|status|...|init
    "demo": "ddtune.cli.demo",  # a real sweep on the bundled models
    "trace": "ddtune.cli.trace",  # trace record|predict|landscape
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ddtune",
        description="Tune DDTree speculative decoding: serve, benchmark, sweep, report.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS.values():
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"ddtune: error: {exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:  # a model built from user input outside parse_table
        print(f"ddtune: error: {validation_to_user_error(exc)}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        missing = missing_engine_module(exc)
        if missing is None:
            raise
        print(f"ddtune: error: {engine_hint(missing)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ddtune: interrupted", file=sys.stderr)
        return 130


__all__ = ["COMMANDS", "build_parser", "main"]
