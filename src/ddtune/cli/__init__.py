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
import os
import select
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


def add_group(
    subparsers: argparse._SubParsersAction, name: str, text: str, metavar: str = "ACTION"
) -> argparse._SubParsersAction:
    """`ddtune NAME ACTION ...`: the group's parser (help `text`) and the subparsers its module
    adds its actions to; one action is required, its name lands in `args.NAME_command`."""
    group = subparsers.add_parser(name, help=text)
    return group.add_subparsers(dest=f"{name}_command", metavar=metavar, required=True)


def comma_ints(text: str, flag: str, least: int) -> list[int]:
    """`flag`'s value such as "4,8,16": a non-empty list of integers, each at least `least`."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UserError(f"{flag} must be comma-separated integers; got {text!r}") from None
    if not values or min(values) < least:
        raise UserError(f"{flag} must list integers >= {least}; got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe (`| head`) is met here, not at exit
        return code
    except BrokenPipeError:
        if not stdout_gone():
            raise  # another pipe (an engine's parser, a server): a real error
        return quiet_pipe()
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


def stdout_gone() -> bool:
    """Has the reader of standard output closed its end (poll says POLLERR)?"""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        events = [event for _, event in poller.poll(0)]
    except (OSError, ValueError, AttributeError):
        return False
    return any(event & select.POLLERR for event in events)


def quiet_pipe() -> int:
    """The reader of standard output went away (`ddtune ... | head`): stop quietly, as a
    shell tool does, with no traceback and no "Exception ignored" at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush goes nowhere
    os.close(devnull)
    return 141  # 128 + SIGPIPE, what a shell reports for a writer cut off by its reader


__all__ = ["COMMANDS", "add_group", "build_parser", "comma_ints", "main", "quiet_pipe"]
