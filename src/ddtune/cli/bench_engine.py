"""CLI: `ddtune bench-engine`: AR vs DFlash vs DDTree budgets on the same prompts, in process.

Single stream by default (`speed.py`), or `--concurrency 1,2,4,8` through the
batch scheduler (`loadspeed.py`); the tables are printed by `tables.py`. Falls
back to a random tiny checkpoint (and says so) when the bundled models are
missing or `--random` is given. See docs/ddtree.md "Engine".
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ddtune.cli import comma_ints
from ddtune.cli.generate import model_args, model_dirs, setup_threads
from ddtune.errors import UserError
from ddtune.params import WINDOW_NONE, DecodeParams, SamplingParams, parse_window

if TYPE_CHECKING:
    from rich.console import Console

    from ddtune.ddtree.bench.speed import SpeedRow


def register(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench-engine", help="in-process speed: AR vs DFlash vs DDTree budgets")
    model_args(bench)
    bench.add_argument("--random", action="store_true", help="use a random tiny checkpoint")
    bench.add_argument("--budgets", default="4,8,16,32,64", help="comma-separated budgets")
    bench.add_argument("--topk", type=int, default=4)
    bench.add_argument("--window", default=WINDOW_NONE)
    bench.add_argument("--max-tokens", type=int, default=64)
    bench.add_argument("--prompts-file", type=Path, help="JSON list of prompt strings")
    bench.add_argument("--repeats", type=int, default=1, help="runs of every prompt per config")
    bench.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    bench.add_argument(
        "--concurrency",
        help="comma-separated request counts decoded together (e.g. 1,2,4,8): aggregate tok/s "
        "through the batch scheduler instead of the single-stream table",
    )
    bench.add_argument(
        "--max-step-tokens", type=int, default=2048, help="scheduler token budget per step"
    )
    bench.set_defaults(func=cmd_bench_engine)


def cmd_bench_engine(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ddtune.ddtree.bench.speed import plan

    console = Console()
    setup_threads(args.threads)
    configs = plan(parse_budgets(args.budgets), args.topk, parse_window(args.window), True)
    sampling = SamplingParams.from_wire({"max_new_tokens": args.max_tokens, "ignore_eos": True})
    if args.repeats < 1:
        raise UserError(f"--repeats must be at least 1; got {args.repeats}")
    if args.concurrency is not None:
        return cmd_concurrency(console, args, configs, sampling)
    prompts, source = read_prompts(args.prompts_file)
    with tempfile.TemporaryDirectory(prefix="ddtune-bench-") as tmp:
        target, drafter, note = bench_models(args, Path(tmp))
        console.print(note)
        console.print(f"prompts: {source}")
        rows = run_single_stream(console, target, drafter, prompts, configs, sampling, args)
    from ddtune.ddtree.bench.tables import print_speed_rows

    print_speed_rows(console, rows)
    if args.json:
        args.json.write_text(json.dumps([r.to_dict() for r in rows], indent=2) + "\n")
    return 0


def cmd_concurrency(
    console: Console,
    args: argparse.Namespace,
    configs: list[DecodeParams],
    sampling: SamplingParams,
) -> int:
    import torch

    from ddtune.ddtree.batch.budget import check_round_fits
    from ddtune.ddtree.bench.loadspeed import run_concurrency_bench
    from ddtune.ddtree.bench.tables import print_rows, print_summary
    from ddtune.ddtree.engine import Engine

    levels = parse_concurrency(args.concurrency)
    wanted = 2 * levels[-1]
    prompts, source = read_prompts(args.prompts_file, count=wanted)
    if len(prompts) < wanted:  # cycle them: 2 x the largest concurrency keeps batches full
        source += f", cycled to {wanted}"
        prompts = (prompts * (wanted // len(prompts) + 1))[:wanted]
    with tempfile.TemporaryDirectory(prefix="ddtune-bench-") as tmp:
        target, drafter, note = bench_models(args, Path(tmp))
        engine = Engine.load(target, drafter)
        for params in configs:  # a bad budget is an error before any run
            check_round_fits(params, engine.block_size, args.max_step_tokens)
        console.print(note)
        console.print(
            f"prompts: {source}; {len(prompts)} prompts x {args.repeats} repeats x "
            f"{sampling.max_new_tokens} tokens, T=0, concurrency {levels}, "
            f"max_step_tokens {args.max_step_tokens}, torch threads {torch.get_num_threads()}"
        )
        rows = run_concurrency_bench(
            engine,
            prompts,
            configs,
            sampling,
            levels,
            args.repeats,
            args.max_step_tokens,
            on_progress=lambda label: console.print(f"  done {label}", style="dim"),
        )
    print_rows(console, rows)
    print_summary(console, rows)
    if args.json:
        args.json.write_text(json.dumps([r.to_dict() for r in rows], indent=2) + "\n")
    return 0


def bench_models(args: argparse.Namespace, tmp: Path) -> tuple[Path, Path | None, str]:
    from ddtune.ddtree.testing import write_random_checkpoint

    if not args.random:
        try:
            target, drafter = model_dirs(args, need_drafter=True)
            return target, drafter, f"models: target {target}, drafter {drafter}"
        except UserError as exc:
            if args.target is not None or args.drafter is not None:
                raise
            reason = f"bundled models missing ({exc})"
    else:
        reason = "--random given"
    target, drafter = write_random_checkpoint(tmp, seed=0)
    return (
        target,
        drafter,
        (
            f"models: a RANDOM tiny checkpoint ({reason}); tau and text are meaningless, "
            "the speed figures show engine overhead only"
        ),
    )


def run_single_stream(
    console: Console,
    target: Path,
    drafter: Path | None,
    prompts: list[str],
    configs: list[DecodeParams],
    sampling: SamplingParams,
    args: argparse.Namespace,
) -> list[SpeedRow]:
    import torch
    from rich.progress import Progress

    from ddtune.ddtree.bench.speed import run_engine_bench
    from ddtune.ddtree.engine import Engine

    engine = Engine.load(target, drafter)
    console.print(
        f"{len(prompts)} prompts x {args.repeats} repeats x {sampling.max_new_tokens} tokens, "
        f"T=0, topk {args.topk}, window {args.window}, block {engine.block_size}, "
        f"torch threads {torch.get_num_threads()}"
    )
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("bench-engine", total=len(configs))
        return run_engine_bench(
            engine,
            prompts,
            configs,
            sampling,
            on_progress=lambda _: progress.advance(task),
            repeats=args.repeats,
        )


def parse_budgets(text: str) -> list[int]:
    """`--budgets` text such as "4,8,16" as a non-empty list of non-negative integers."""
    return comma_ints(text, "--budgets", 0)


def parse_concurrency(text: str) -> list[int]:
    """`--concurrency` text such as "1,2,4,8": positive integers, ascending, no repeats."""
    return sorted(set(comma_ints(text, "--concurrency", 1)))


def read_prompts(path: Path | None, count: int = 4) -> tuple[list[str], str]:
    """The prompts of `--prompts-file` (a JSON list of strings), or the default ones."""
    from ddtune.ddtree.bench.speed import default_prompts

    if path is None:
        return default_prompts(count)
    try:
        prompts = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read prompts from {path}: {exc}") from None
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
        raise UserError(f"{path} must hold a non-empty JSON list of strings")
    return prompts, str(path)
