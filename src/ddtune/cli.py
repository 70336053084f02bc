"""The `ddtune` command: a thin argparse front that hands each subcommand to its package.

Each package owns a `commands` module with `register(subparsers)`; the parser
it adds sets `func`, which takes the parsed args and returns an exit code.
Modules are imported only to register; heavy imports (torch) live inside the
handlers so that `ddtune --help` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from pydantic import ValidationError

from ddtune.errors import UserError
from ddtune.extras import engine_hint, missing_engine_module
from ddtune.tables import validation_to_user_error

COMMAND_MODULES = [
    "ddtune.engine.commands",  # generate
    "ddtune.engine.bench.commands",  # bench-engine
    "ddtune.train.commands",  # train tokenizer|tasks|target|drafter|eval
    "ddtune.server.commands",  # serve
    "ddtune.bench.commands",  # bench
    "ddtune.sweep.commands",  # sweep plan|run|status|retry|export|report|cleanup, demo
    "ddtune.sweep.tracing",  # trace record|predict|landscape
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ddtune",
        description="Tune DDTree speculative decoding: serve, benchmark, sweep, report.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue  # package not built yet
        module.register(sub)
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


if __name__ == "__main__":
    sys.exit(main())
