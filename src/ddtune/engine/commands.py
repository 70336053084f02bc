"""CLI: `ddtune generate` (one request) and `ddtune bench-engine` (AR vs DFlash vs DDTree).

Both default to the bundled models; `bench-engine` falls back to a random
tiny checkpoint (and says so) when they are missing or `--random` is given.
Flags become `DecodeParams`/`SamplingParams` through their `from_wire`, so a
bad value is a one-line `UserError`. See docs/architecture.md "Engine".
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ddtune.errors import UserError
from ddtune.params import MODES, WINDOW_NONE, DecodeParams, SamplingParams, parse_window

if TYPE_CHECKING:
    from rich.console import Console

    from ddtune.engine.bench.speed import SpeedRow


def register(sub: argparse._SubParsersAction) -> None:
    gen = sub.add_parser("generate", help="generate text with the engine (ar, dflash, ddtree)")
    _model_args(gen)
    gen.add_argument("--mode", choices=MODES, default="ddtree")
    gen.add_argument("--budget", type=int, default=16, help="tree node budget (ddtree)")
    gen.add_argument("--topk", type=int, default=4, help="per-depth branching cap (ddtree)")
    gen.add_argument("--window", default=WINDOW_NONE, help="drafter context window W or 'none'")
    gen.add_argument("--max-tokens", type=int, default=64)
    gen.add_argument("--temperature", type=float, default=0.0)
    gen.add_argument("--top-p", type=float, default=1.0)
    gen.add_argument("--seed", type=int, default=None)
    gen.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    gen.add_argument("--ignore-eos", action="store_true")
    source = gen.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="prompt text")
    source.add_argument("--prompt-file", type=Path, help="file holding the prompt text")
    gen.add_argument("--json", action="store_true", help="print one JSON object")
    gen.set_defaults(func=cmd_generate)

    bench = sub.add_parser("bench-engine", help="in-process speed: AR vs DFlash vs DDTree budgets")
    _model_args(bench)
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


def _model_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", type=Path, help="target model folder (default: bundled)")
    parser.add_argument("--drafter", type=Path, help="DFlash drafter folder (default: bundled)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")


def _setup_threads(threads: int | None) -> None:
    import torch

    if threads is not None:
        if threads < 1:
            raise UserError(f"--threads must be at least 1; got {threads}")
        torch.set_num_threads(threads)


def _model_dirs(args: argparse.Namespace, need_drafter: bool) -> tuple[Path, Path | None]:
    from ddtune import assets

    target = args.target or assets.default_target_dir()
    drafter = args.drafter
    if drafter is None and need_drafter:
        drafter = assets.default_drafter_dir()
    return target, drafter


def generate_params(args: argparse.Namespace) -> tuple[DecodeParams, SamplingParams]:
    """The `ddtune generate` flags as parameters; `UserError` names a bad one."""
    params = DecodeParams.from_wire(
        {
            "mode": args.mode,
            "budget": args.budget,
            "topk": args.topk,
            "window": parse_window(args.window),
        }
    )
    sampling = SamplingParams.from_wire(
        {
            "max_new_tokens": args.max_tokens,
            "temperature": args.temperature,
            "top_p": args.top_p,
            "seed": args.seed,
            "stop_strings": args.stop,
            "ignore_eos": args.ignore_eos,
        }
    )
    return params, sampling


def cmd_generate(args: argparse.Namespace) -> int:
    from ddtune.engine.engine import Engine

    _setup_threads(args.threads)
    params, sampling = generate_params(args)
    text = args.prompt if args.prompt is not None else _read(args.prompt_file)
    target, drafter = _model_dirs(args, need_drafter=params.mode != "ar")
    engine = Engine.load(target, drafter)
    result = engine.generate(engine.tokenizer.encode(text), params, sampling)
    if args.json:
        print(json.dumps(result.to_dict()))
        return 0
    print(result.text)
    s = result.stats
    print(
        f"[{len(result.token_ids)} tokens, {result.finish_reason}, {s.rounds} rounds, "
        f"tau {s.mean_acceptance_length:.2f}, {s.tokens_per_second:.1f} tok/s]",
        file=sys.stderr,
    )
    return 0


def _read(path: Path) -> str:
    if not path.is_file():
        raise UserError(f"prompt file {path} does not exist")
    return path.read_text()


def cmd_bench_engine(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ddtune.engine.bench.speed import plan

    console = Console()
    _setup_threads(args.threads)
    configs = plan(parse_budgets(args.budgets), args.topk, parse_window(args.window), True)
    sampling = SamplingParams.from_wire({"max_new_tokens": args.max_tokens, "ignore_eos": True})
    if args.repeats < 1:
        raise UserError(f"--repeats must be at least 1; got {args.repeats}")
    if args.concurrency is not None:
        from ddtune.engine.bench.tables import cmd_concurrency

        return cmd_concurrency(console, args, configs, sampling)
    prompts, source = _prompts(args.prompts_file)
    with tempfile.TemporaryDirectory(prefix="ddtune-bench-") as tmp:
        target, drafter, note = _bench_models(args, Path(tmp))
        console.print(note)
        console.print(f"prompts: {source}")
        rows = _run_bench(console, target, drafter, prompts, configs, sampling, args)
    _print_rows(console, rows)
    if args.json:
        args.json.write_text(json.dumps([r.to_dict() for r in rows], indent=2) + "\n")
    return 0


def _bench_models(args: argparse.Namespace, tmp: Path) -> tuple[Path, Path | None, str]:
    from ddtune.engine.testing import write_random_checkpoint

    if not args.random:
        try:
            target, drafter = _model_dirs(args, need_drafter=True)
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


def _run_bench(
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

    from ddtune.engine.bench.speed import run_engine_bench
    from ddtune.engine.engine import Engine

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


def _print_rows(console: Console, rows: list[SpeedRow]) -> None:
    from rich.table import Table

    ar = rows[0].tokens_per_second or 1.0
    table = Table(title="bench-engine (T=0, same prompts)")
    table.add_column("config", no_wrap=True, min_width=max(len(r.label) for r in rows))
    for col in ("tok/s", "x AR", "tau", "tree+commit", "draft", "verify", "= AR"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            r.label,
            f"{r.tokens_per_second:.1f}",
            f"{r.tokens_per_second / ar:.2f}",
            f"{r.tau:.2f}",
            f"{r.overhead_share:.1%}",
            f"{r.draft_share:.1%}",
            f"{r.verify_share:.1%}",
            "yes" if r.lossless else "NO",
        )
    console.print(table)


def parse_budgets(text: str) -> list[int]:
    """`--budgets` text such as "4,8,16" as a non-empty list of non-negative integers."""
    try:
        budgets = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise UserError(f"--budgets must be comma-separated integers; got {text!r}") from None
    if not budgets or min(budgets) < 0:
        raise UserError(f"--budgets must list non-negative integers; got {text!r}")
    return budgets


def _prompts(path: Path | None, count: int = 4) -> tuple[list[str], str]:
    from ddtune.engine.bench.speed import default_prompts

    if path is None:
        return default_prompts(count)
    try:
        prompts = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read prompts from {path}: {exc}") from None
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
        raise UserError(f"{path} must hold a non-empty JSON list of strings")
    return prompts, str(path)
