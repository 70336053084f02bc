"""`ddtune demo`: a real sweep on the bundled models, then its report (`ddtune.sweep.demo`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ddtune.cli.sweep import EXIT_CODES, exit_3_on_ctrl_c


def register(subparsers: argparse._SubParsersAction) -> None:
    """`ddtune demo [--out DIR] [--spec S] [--hot-spec S] [--fresh]`."""
    demo = subparsers.add_parser(
        "demo", help="a real sweep on the bundled models, then its report", epilog=EXIT_CODES
    )
    demo.add_argument("--out", default="runs/demo", help="where the stores and reports go")
    demo.add_argument("--spec", help="restart-pass spec (default: examples/demo.toml)")
    demo.add_argument("--hot-spec", help="hot-pass spec (default: examples/demo-hot.toml)")
    demo.add_argument(
        "--fresh", action="store_true", help="discard a previous demo run instead of resuming"
    )
    demo.set_defaults(func=cmd_demo)


@exit_3_on_ctrl_c
def cmd_demo(args: argparse.Namespace) -> int:
    from ddtune.sweep.demo import run_demo

    restart, hot = (Path(p) if p else None for p in (args.spec, args.hot_spec))
    return run_demo(Path(args.out), restart, hot, fresh=args.fresh)
