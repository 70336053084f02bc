"""`python -m ddtune.launchers sglang|vllm ...`: print or exec one engine command line.

A sweep spec's `command` (or a systemd `ExecStart=`) can only substitute
placeholders into fixed arguments; it cannot leave out
`--speculative-dflash-draft-window-size` when the window is "none", or every
speculative flag when the mode is `ar`. This front end takes the trial's values
as plain options, builds the argv with the kind's `launch_command` (one
subcommand per server kind that has a launcher, see `ddtune.kinds`) and
replaces itself with the engine (`os.execvpe`: same PID, so the controller's
process and identity checks see the engine itself). `--print` shows the
command instead:

    python -m ddtune.launchers sglang --model-path M --draft-model-path D \\
        --mode ddtree --budget 8 --topk 4 --window none --port 30000 --tp 8 \\
        --python /opt/sglang/bin/python -- --mem-fraction-static 0.8
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from ddtune.errors import UserError
from ddtune.kinds import SERVER_KINDS, get_kind


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ddtune.launchers", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="engine", required=True)
    for kind in map(get_kind, SERVER_KINDS):
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


def build(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The engine argv and environment additions for parsed options."""
    return get_kind(args.engine).launch_command(args)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        command, env = build(args)
    except UserError as exc:
        print(f"ddtune.launchers: error: {exc}", file=sys.stderr)
        return 2
    if args.print:
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
        print((prefix + " " if prefix else "") + shlex.join(command))
        return 0
    sys.stdout.flush()
    os.execvpe(command[0], command, {**os.environ, **env})
    return 127  # not reached: execvpe replaced this process


if __name__ == "__main__":
    sys.exit(main())
