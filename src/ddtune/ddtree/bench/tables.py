"""The tables `ddtune bench-engine` prints: single stream, and `--concurrency` with its summary.

The concurrency table has every (concurrency, config) row (wall tok/s and
tokens per CPU-second), then the summary, by CPU time (robust on a shared
machine; see `loadspeed`): per concurrency AR's aggregate tok/s (and its
ratio to concurrency 1), the best speculative config and its advantage over
AR, the crossover concurrency, and the tree + mask + commit share of round
time for the largest budget at the largest concurrency. See
docs/ddtree.md "Engine".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from ddtune.ddtree.bench.loadspeed import LoadRow
    from ddtune.ddtree.bench.speed import SpeedRow


def print_speed_rows(console: Console, rows: list[SpeedRow]) -> None:
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

    from ddtune.ddtree.bench.loadspeed import crossover, speed, summarize

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
