"""`ddtune sweep init (--from-unit NAME|PATH | --from-command -- ARGV...) --out SPEC [--force]
[--methods M1,M2=DRAFTER,...]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ddtune.errors import UserError

INIT_EPILOG = """examples:
  ddtune sweep init --from-unit sglang-kimi.service --out kimi.toml
  ddtune sweep init --from-unit sglang-kimi.service --methods dflash,ddtree --out kimi.toml
  ddtune sweep init --out local.toml --from-command -- \\
      python -m sglang.launch_server --model-path /models/M --speculative-algorithm DFLASH ...
--from-command reads the command after `--`, the last thing on the line.
exit codes: 0 written; 2 bad input (no ExecStart, an engine other than SGLang or vLLM,
a unit that does not exist, a command with no model, an existing --out without --force)"""


def add_init(actions: argparse._SubParsersAction) -> None:
    """Register `sweep init` on the `sweep` subcommands."""
    init = actions.add_parser(
        "init",
        help="write a spec from the service as it runs today (its unit or launch command)",
        epilog=INIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = init.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--from-unit",
        metavar="NAME|PATH",
        help="a systemd unit: a bare name is read from systemd (`systemctl cat`, drop-ins "
        "included); a path with a / (e.g. ./kimi.service) is read as a unit file",
    )
    source.add_argument(
        "--from-command",
        action="store_true",
        help="the launch command, given after `--` at the end of the line",
    )
    init.add_argument("argv", nargs="*", metavar="ARGV", help="with --from-command: the command")
    init.add_argument("--out", required=True, metavar="SPEC", help="the spec to write (TOML)")
    init.add_argument("--force", action="store_true", help="overwrite an existing --out")
    init.add_argument(
        "--methods",
        metavar="M1,M2=DRAFTER,...",
        help="sweep these speculative-decoding methods too, beside the one the service runs: "
        "ar, dflash, ddtree, eagle, eagle3, mtp, ngram (ddtune.methods); a method that needs "
        "a draft model names it, e.g. eagle3=/models/eagle3-head (ddtree and dflash share "
        "the running DFlash drafter). Each gets its own knobs, carried into the launch "
        "command by {method_args}",
    )
    init.set_defaults(func=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
    from ddtune.sweep.init.build import build_spec, write_spec
    from ddtune.sweep.init.more_methods import parse_methods
    from ddtune.sweep.init.source import from_command, from_unit

    if args.from_unit and args.argv:
        raise UserError("--from-unit takes no command words; use --from-command -- ARGV for one")
    methods = parse_methods(args.methods) if args.methods else []
    source = from_unit(args.from_unit) if args.from_unit else from_command(args.argv)
    out = Path(args.out)
    if out.exists() and not args.force:
        raise UserError(f"{out} exists; pass --force to overwrite it, or choose another --out")
    result = build_spec(source, front=sys.executable, methods=methods)
    write_spec(out, result.text, force=True)
    launch = result.launch
    print(f"wrote {out}: {launch.engine} {launch.method} from {source.origin}")
    print(plan_cost(out))
    print(f"next: ddtune sweep plan {out}  (the engine's check of every launch command)")
    return 0


def plan_cost(spec_path: Path) -> str:
    """What `sweep plan` prints first: configs, the race mode, restarts and hours."""
    from ddtune.sweep.plan import read_spec
    from ddtune.sweep.plan.prepare import prepare

    return prepare(read_spec(spec_path), None).estimate_text()


__all__ = ["add_init", "cmd_init", "plan_cost"]
