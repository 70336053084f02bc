"""Launch commands as the engine sees them: ddtune's launcher front, or the engine itself.

    parser = launcher_parser()                  # `python -m ddtune.launchers <engine> ...`
    argv, env = build(parser.parse_args(args))  # the engine's argv and environment additions
    found = engine_of(argv, engine)             # Recognised: the engine, its Python; or None
    command = engine_command(found, argv, env, info)   # what the engine's own parser reads

A service command is one of
    PY -m ddtune.launchers ENGINE ... the front (its `--python` is the engine's Python;
                                      the engine's module builds its argv)
    PY -m MODULE ...                  the engine itself (MODULE one of the engine's
                                      `engine_modules`, e.g. sglang.launch_server)
Anything else (an entry-point script such as `sglang serve`, a wrapper, a
container) is not recognised: the engine check says so. `launchers/__main__.py`
is the command-line face of the front.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ddtune.engines import ENGINES, ServerEngine, get_engine
from ddtune.engines.parser_probe import EngineCommand, EngineInfo

LAUNCHER_MODULE = "ddtune.launchers"


@dataclass(frozen=True)
class Recognised:
    """A service command's engine (`kind`: its `ServerEngine`), its Python and, for the front,
    the parsed options."""

    kind: ServerEngine
    python: str
    front: argparse.Namespace | None = None  # the launcher's options; None: the engine itself


def launcher_parser() -> argparse.ArgumentParser:
    """The parser of `python -m ddtune.launchers`: one subcommand per engine with a launcher."""
    parser = argparse.ArgumentParser(
        prog="python -m ddtune.launchers",
        description="print or exec one engine command line built from ddtune's parameters",
    )
    sub = parser.add_subparsers(dest="engine", required=True)
    for kind in map(get_engine, ENGINES):
        if kind.launch_help is None:
            continue
        engine = sub.add_parser(kind.name, help=kind.launch_help)
        kind.add_launch_options(engine)
        _common(engine, default_port=kind.default_port)
    return parser


def _common(parser: argparse.ArgumentParser, default_port: int) -> None:
    parser.add_argument("--port", type=int, default=default_port)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--python", default=sys.executable, help="the engine's Python interpreter")
    parser.add_argument(
        "--print", action="store_true", help="print the command instead of running it"
    )
    parser.add_argument("extra", nargs="*", help="after --: passed to the engine unchanged")


def build(
    args: argparse.Namespace, engine: EngineInfo | None = None
) -> tuple[list[str], dict[str, str]]:
    """The engine argv and environment additions for parsed launcher options."""
    return get_engine(args.engine).launch_command(args, engine)


def env_words(env: Mapping[str, str]) -> str:
    """`K=V ...`, sorted and shell-quoted."""
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))


def command_line(env: Mapping[str, str], argv: Sequence[str]) -> str:
    """A command as one shell line: `K=V ... argv` (the launcher's `--print`)."""
    prefix = env_words(env)
    return (prefix + " " if prefix else "") + shlex.join(argv)


def engine_of(argv: Sequence[str], engine: str | None = None) -> Recognised | None:
    """The engine behind a service command (see the module docstring), or None.

    `engine` (the service's `[service] engine`) decides which engine modules count when the
    command runs the engine itself.
    """
    items = list(argv)
    if len(items) >= 4 and items[1:3] == ["-m", LAUNCHER_MODULE]:
        try:
            args = launcher_parser().parse_args(items[3:])
        except SystemExit:
            return None  # the front would refuse it too; its own error says why
        return Recognised(get_engine(args.engine), str(args.python), args)
    module = items[2] if len(items) >= 3 and items[1] == "-m" else None
    for kind in map(get_engine, ENGINES):
        if module in kind.engine_modules and engine in (None, kind.name):
            return Recognised(kind, items[0])
    return None


def engine_command(
    found: Recognised,
    argv: Sequence[str],
    env: Mapping[str, str],
    engine: EngineInfo | None = None,
) -> EngineCommand:
    """The command the engine would read: built by the front, or `argv` itself."""
    if found.front is None:
        return EngineCommand(found.python, argv[2], tuple(argv[3:]), dict(env))
    built, added = build(found.front, engine)
    origins = found.kind.parameter_origins(engine)
    return EngineCommand(
        python=built[0],
        module=built[2],
        args=tuple(built[3:]),
        env={**env, **added},
        origins=origins,
        checked_env=tuple(added),
    )


__all__ = [
    "LAUNCHER_MODULE",
    "Recognised",
    "build",
    "command_line",
    "engine_command",
    "engine_of",
    "env_words",
    "launcher_parser",
]
