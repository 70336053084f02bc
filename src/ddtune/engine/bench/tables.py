"""`ddtune bench-engine --concurrency 1,2,4,8`: run `loadspeed` and print its tables.

Prints one table with every (concurrency, config) row (wall tok/s and
tokens per CPU-second), then the summary, by CPU time (robust on a shared
machine; see `loadspeed`):
per concurrency AR's aggregate tok/s (and its ratio to concurrency 1), the
best speculative config and its advantage over AR, the crossover
concurrency, and the tree + mask + commit share of round time for the
largest budget at the largest concurrency. See docs/architecture.md "Engine".
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ddtune.errors import UserError
from ddtune.params import DecodeParams, SamplingParams

if TYPE_CHECKING:
    from rich.console import Console

    from ddtune.engine.bench.loadspeed import LoadRow


def parse_concurrency(text: str) -> list[int]:
    """`--concurrency` text such as "1,2,4,8": positive integers, ascending, no repeats."""
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise UserError(f"--concurrency must be comma-separated integers; got {text!r}") from None
    if not values or values[0] < 1:
        raise UserError(f"--concurrency must list integers >= 1; got {text!r}")
    return values


def cmd_concurrency(
    console: Console,
    args: argparse.Namespace,
    configs: list[DecodeParams],
    sampling: SamplingParams,
) -> int:
    import torch

    from ddtune.engine.batch.budget import check_round_fits
    from ddtune.engine.bench.loadspeed import run_concurrency_bench
    from ddtune.engine.commands import _bench_models, _prompts
    from ddtune.engine.engine import Engine

    levels = parse_concurrency(args.concurrency)
    wanted = 2 * levels[-1]
    prompts, source = _prompts(args.prompts_file, count=wanted)
    if len(prompts) < wanted:  # cycle them: 2 x the largest concurrency keeps batches full
        source += f", cycled to {wanted}"
        prompts = (prompts * (wanted // len(prompts) + 1))[:wanted]
    with tempfile.TemporaryDirectory(prefix="ddtune-bench-") as tmp:
        target, drafter, note = _bench_models(args, Path(tmp))
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


def print_rows(console: Console, rows: list[LoadRow]) -> None:
    from rich.table import Table

    table = Table(title="bench-engine --concurrency (T=0, same prompts, aggregate)")
    table.add_column("c", justify="right")
    table.add_column("config", no_wrap=True, min_width=max(len(r.label) for r in rows))
    for col in ("tok/s wall", "tok/cpu-s", "tau", "batch", "tree+mask+commit", "= AR"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            str(r.concurrency),
            r.label,
            f"{r.tokens_per_second:.1f}",
            f"{r.tokens_per_cpu_second:.1f}",
            f"{r.tau:.2f}",
            f"{r.mean_batch:.2f}",
            f"{r.overhead_share:.1%}",
            "yes" if r.lossless else "NO",
        )
    console.print(table)


def print_summary(console: Console, rows: list[LoadRow]) -> None:
    from rich.table import Table

    from ddtune.engine.bench.loadspeed import crossover, speed, summarize

    clock = "cpu" if all(r.cpu_seconds for r in rows) else "wall"
    summaries = summarize(rows, clock)
    base = speed(summaries[0].ar, clock) or 1.0
    unit = "tok/cpu-s" if clock == "cpu" else "tok/s"
    table = Table(title=f"per concurrency ({unit}): AR vs the best speculative config")
    for col in ("c", f"AR {unit}", "AR x c1", "best config", unit, "x AR"):
        table.add_column(col, justify="right")
    for s in summaries:
        best = s.best
        table.add_row(
            str(s.concurrency),
            f"{speed(s.ar, clock):.1f}",
            f"{speed(s.ar, clock) / base:.2f}",
            best.label if best else "-",
            f"{speed(best, clock):.1f}" if best else "-",
            f"{s.advantage:.2f}" if best else "-",
        )
    console.print(table)
    cross = crossover(summaries)
    if any(s.best for s in summaries):
        console.print(
            f"crossover: speculation stops beating AR at concurrency {cross}"
            if cross is not None
            else "crossover: speculation beats AR at every concurrency measured"
        )
    _print_overhead(console, rows)


def _print_overhead(console: Console, rows: list[LoadRow]) -> None:
    """Tree + mask + commit share for the largest ddtree budget at the largest concurrency."""
    trees = [r for r in rows if r.params.mode == "ddtree"]
    if not trees:
        return
    row = max(trees, key=lambda r: (r.concurrency, r.params.budget))
    console.print(
        f"tree build + mask + commit at {row.label}, concurrency {row.concurrency} "
        f"(mean batch {row.mean_batch:.2f}): {row.overhead_share:.1%} of round time"
    )
