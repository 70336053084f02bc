"""A real restart-bound race against the full grid of the same configs, on this machine.

    PYTHONPATH=src python benchmarks/restart_bound_cpu.py [--spec examples/restart-bound-cpu.toml] \
        [--out runs/restart-bound-cpu] [--passes 10]

Every trial restarts `ddtune serve` (bundled models, the process controller's
full readiness protocol: a real start of ~5 s against a bench of ~1-2 s).

1. The race: `ddtune sweep run SPEC` (restart-bound, chosen by "auto" from the
   spec's costs).
2. The grid: the same spec with `strategy = "grid"` and `repeats = PASSES`
   (the race's most passes), `ddtune sweep run` the same way.
3. `ddtune sweep report` of each; printed per sweep: wall time of the run,
   restarts, benches, the throughput recommendation (status, config); then the
   race's wall time as a share of the grid's.

Real subprocesses and the real CLI, run one after the other on the same machine.
Results: docs/benchmarks.md "Restart-bound races".
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from ddtune.sweep.spec.load import parse_spec
from ddtune.sweep.store.db import Store


def grid_spec(text: str, passes: int) -> str:
    """The race spec as a grid: every config in each of `passes` interleaved passes."""
    text = re.sub(r'(?m)^name = "([^"]+)"', r'name = "\1-grid"', text, count=1)
    text = re.sub(r'(?m)^strategy = "race"', 'strategy = "grid"', text, count=1)
    text = re.sub(r"(?m)^repeats = \d+", f"repeats = {passes}", text, count=1)
    return re.sub(r"(?m)^(min_repeats|max_trials|max_hours|restart_bound) = .*\n", "", text)


def run(spec: Path, out: Path) -> dict[str, object]:
    """`ddtune sweep run` then `ddtune sweep report`; the figures of the stored sweep."""
    store = out / "store.sqlite"
    cli = [sys.executable, "-m", "ddtune.cli", "sweep"]
    started = time.monotonic()
    with open(out / "run.log", "w") as log:
        code = subprocess.run(
            [*cli, "run", str(spec), "--store", str(store)], stdout=log, stderr=subprocess.STDOUT
        ).returncode
    wall = time.monotonic() - started
    with open(out / "report.log", "w") as log:
        subprocess.run(
            [*cli, "report", "--store", str(store), "--out", str(out / "report")],
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
        )
    report = json.loads((out / "report" / "results.json").read_text())["report"]
    headline = report["recommendations"][0]
    return {"exit": code, "wall_s": wall, **_counts(store), **_verdict(headline)}


def _counts(store_path: Path) -> dict[str, int]:
    store = Store(store_path, create=False)
    try:
        restarts = store.db.execute(
            "SELECT COUNT(*) FROM attempts WHERE json_extract(timings_json, '$.start_to_ready_s')"
            " IS NOT NULL"
        ).fetchone()[0]
        benches = store.db.execute("SELECT COUNT(*) FROM trials WHERE status='done'").fetchone()[0]
    finally:
        store.close()
    return {"restarts": int(restarts), "benches": int(benches)}


def _verdict(headline: dict[str, object]) -> dict[str, object]:
    return {
        "status": headline["status"],
        "winner": headline["label"],
        "leader": headline.get("leader"),
        "text": headline["text"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=Path("examples/restart-bound-cpu.toml"))
    parser.add_argument("--out", type=Path, default=Path("runs/restart-bound-cpu"))
    parser.add_argument("--passes", type=int, default=10)
    args = parser.parse_args()
    race_dir, grid_dir = args.out / "race", args.out / "grid"
    for folder in (race_dir, grid_dir):
        folder.mkdir(parents=True, exist_ok=True)
    grid_path = grid_dir / "grid.toml"
    grid_path.write_text(grid_spec(args.spec.read_text(), args.passes))
    parse_spec(grid_path.read_text(), str(grid_path), args.spec.parent.resolve())  # checks it
    figures = {"race": run(args.spec, race_dir), "grid": run(grid_path, grid_dir)}
    for name, f in figures.items():
        print(
            f"{name}: exit {f['exit']}, {f['wall_s']:.0f} s, {f['restarts']} restarts, "
            f"{f['benches']} benches; {f['status']}: {f['winner']} (leader {f['leader']})"
        )
        print(f"  {f['text']}")
    race, grid = figures["race"], figures["grid"]
    share = float(race["wall_s"]) / float(grid["wall_s"])  # type: ignore[arg-type]
    print(f"race wall / grid wall = {share:.0%}; same winner: {race['winner'] == grid['winner']}")


if __name__ == "__main__":
    main()
