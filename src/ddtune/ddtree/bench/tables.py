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

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from ddtune.ddtree.bench.loadspeed import LoadRow
    from ddtune.ddtree.bench.speed import SpeedRow


def print_speed_rows(console: Console, rows: list[SpeedRow]) -> None:
    ar = rows[0].tokens_per_second or 1.0
    columns = ("config", "tok/s", "x AR", "tau", "tree+commit", "draft", "verify", "= AR")
    cells = [
        (
            r.label,
            f"{r.tokens_per_second:.1f}",
            f"{r.tokens_per_second / ar:.2f}",
            f"{r.tau:.2f}",
            f"{r.overhead_share:.1%}",
            f"{r.draft_share:.1%}",
            f"{r.verify_share:.1%}",
            "yes" if r.lossless else "NO",
        )
        for r in rows
    ]
    _print_table(console, "bench-engine (T=0, same prompts)", columns, cells)


def print_rows(console: Console, rows: list[LoadRow]) -> None:
    title = "bench-engine --concurrency (T=0, same prompts, aggregate)"
    columns = ("c", "config", "tok/s wall", "tok/cpu-s", "tau", "batch", "tree+mask+commit", "= AR")
    cells = [
        (
            str(r.concurrency),
            r.label,
            f"{r.tokens_per_second:.1f}",
            f"{r.tokens_per_cpu_second:.1f}",
            f"{r.tau:.2f}",
            f"{r.mean_batch:.2f}",
            f"{r.overhead_share:.1%}",
            "yes" if r.lossless else "NO",
        )
        for r in rows
    ]
    _print_table(console, title, columns, cells)


def print_summary(console: Console, rows: list[LoadRow]) -> None:
    from ddtune.ddtree.bench.loadspeed import crossover, speed, summarize

    clock = "cpu" if all(r.cpu_seconds for r in rows) else "wall"
    summaries = summarize(rows, clock)
    base = speed(summaries[0].ar, clock) or 1.0
    unit = "tok/cpu-s" if clock == "cpu" else "tok/s"
    cells = [
        (
            str(s.concurrency),
            f"{speed(s.ar, clock):.1f}",
            f"{speed(s.ar, clock) / base:.2f}",
            s.best.label if s.best else "-",
            f"{speed(s.best, clock):.1f}" if s.best else "-",
            f"{s.advantage:.2f}" if s.best else "-",
        )
        for s in summaries
    ]
    _print_table(
        console,
        f"per concurrency ({unit}): AR vs the best speculative config",
        ("c", f"AR {unit}", "AR x c1", "best config", unit, "x AR"),
        cells,
    )
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


def _print_table(
    console: Console, title: str, columns: Sequence[str], cells: Sequence[Sequence[str]]
) -> None:
    """Figures right-aligned; a "config" column left-aligned, never wrapped."""
    from rich.table import Table

    table = Table(title=title)
    for i, col in enumerate(columns):
        if col == "config":
            table.add_column(col, no_wrap=True, min_width=max(len(row[i]) for row in cells))
        else:
            table.add_column(col, justify="right")
    for row in cells:
        table.add_row(*row)
    console.print(table)
