"""How long one live-report rewrite takes, and where the time goes.

    python benchmarks/live_report.py runs/demo/hot/store.sqlite [--times 6]

Calls the runner's `LiveReport` (sweep/reporting.py) on a store (opened read
only; the report goes to a temporary folder) `--times` times and prints the
first rewrite (it imports matplotlib), the median, min and max of the rest, and
how much of a rewrite the plots (every PNG: the four summary plots, the
forest and race plots, the load plots) take. See docs/report.md "The live report".
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console

from ddtune.report.load import plots as load_plots
from ddtune.report.render import plots, verdict_plots
from ddtune.sweep.reporting import LiveReport
from ddtune.sweep.store.db import Store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--times", type=int, default=6)
    args = parser.parse_args()
    store = Store(args.store, read_only=True)
    sweep = store.sweep_row()
    trials = len(store.trial_records(sweep["id"]))
    plot_seconds: list[float] = []
    save = plots.save_plots

    def timed_save(*a, **k):  # noqa: ANN002, ANN003, ANN202 - a pass-through
        started = time.perf_counter()
        try:
            return save(*a, **k)
        finally:
            plot_seconds.append(time.perf_counter() - started)

    for module in (plots, verdict_plots, load_plots):  # each imported save_plots by name
        module.save_plots = timed_save  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as out:
        live = LiveReport(Path(out), sweep["name"], Console(file=open(os.devnull, "w")))  # noqa: SIM115
        live.MAX_SHARE = 1.0  # rewrite every time
        per_rewrite = []
        for _ in range(args.times):
            before = len(plot_seconds)
            live(store)
            per_rewrite.append(sum(plot_seconds[before:]))
    rest = live.seconds[1:]
    print(
        f"{args.store} ({sweep['name']}, {trials} trials): first rewrite {live.seconds[0]:.2f} s "
        f"(imports matplotlib); then median {statistics.median(rest):.2f} s "
        f"(min {min(rest):.2f}, max {max(rest):.2f}), of which the plots "
        f"{statistics.median(per_rewrite[1:]):.2f} s"
    )


if __name__ == "__main__":
    main()
