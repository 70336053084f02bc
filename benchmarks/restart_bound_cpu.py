"""A real restart-bound race against the full grid of the same configs, on this machine.

    PYTHONPATH=src python benchmarks/restart_bound_cpu.py [--spec examples/restart-bound-cpu.toml] \
        [--out runs/restart-bound-cpu] [--passes 10]

Every trial restarts `ddtune serve` (bundled models, the process controller's
full readiness protocol: a real start of ~5 s against a bench of ~1-2 s).

1. The race: `ddtune sweep run SPEC` (restart-bound, chosen by "auto" from the
   spec's costs).
2. The grid: the same spec with `strategy = "grid"` and `repeats = PASSES`
   (the race's most passes), `ddtune sweep run` the same way.
3. With `--predict`: predict, then confirm. `ddtune trace record --spec` of the
   same spec as `strategy = "predict"` (the bench's requests, windows 64 and none),
   then `ddtune sweep run` of it; its wall time counts the recording.
   With `--predict-in-grid-store` as well, after the grid: the same predict sweep
   without `start_spread`, run in a copy of the grid's store, so the race takes the
   start spread measured on the grid's passes (docs/sweeps.md).
4. `ddtune sweep report` of each; printed per sweep: wall time of the run,
   restarts, benches, the throughput recommendation (status, config); then each
   one's wall time as a share of the grid's.

Real subprocesses and the real CLI, run one after the other on the same machine.
Results: docs/benchmarks.md "Restart-bound races".
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from ddtune.params import DecodeParams
from ddtune.report.summarize import cost_key
from ddtune.sweep.plan import parse_spec
from ddtune.sweep.store.db import Store


def grid_spec(text: str, passes: int) -> str:
    """The race spec as a grid: every config in each of `passes` interleaved passes."""
    text = re.sub(r'(?m)^name = "([^"]+)"', r'name = "\1-grid"', text, count=1)
    text = re.sub(r'(?m)^strategy = "race"', 'strategy = "grid"', text, count=1)
    text = re.sub(r"(?m)^repeats = \d+", f"repeats = {passes}", text, count=1)
    return re.sub(
        r"(?m)^(min_repeats|max_trials|max_hours|restart_bound|start_spread) = .*\n", "", text
    )


def predict_spec(text: str, trace: Path) -> str:
    """The race spec as strategy "predict" with its trace at `trace`."""
    text = re.sub(r'(?m)^name = "([^"]+)"', r'name = "\1-predict"', text, count=1)
    return re.sub(
        r'(?m)^strategy = "race"', f'strategy = "predict"\ntrace = "{trace}"', text, count=1
    )


def record(spec: Path, trace: Path) -> float:
    """`ddtune trace record --spec SPEC --out TRACE --fresh`; its wall seconds."""
    started = time.monotonic()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "ddtune.cli",
            "trace",
            "record",
            "--spec",
            str(spec),
            "--out",
            str(trace),
            "--fresh",
        ],
        check=True,
    )
    return time.monotonic() - started


def run(spec: Path, out: Path) -> dict[str, object]:
    """`ddtune sweep run` then `ddtune sweep report` in `out`'s store; the figures of the
    spec's sweep (the store may hold earlier ones)."""
    store = out / "store.sqlite"
    name = parse_spec(spec.read_text(), str(spec), spec.parent.resolve()).name
    cli = [sys.executable, "-m", "ddtune.cli", "sweep"]
    started = time.monotonic()
    with open(out / "run.log", "w") as log:
        code = subprocess.run(
            [*cli, "run", str(spec), "--store", str(store)], stdout=log, stderr=subprocess.STDOUT
        ).returncode
    wall = time.monotonic() - started
    with open(out / "report.log", "w") as log:
        subprocess.run(
            [*cli, "report", "--store", str(store), "--sweep", name, "--out", str(out / "report")],
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
        )
    report = json.loads((out / "report" / "results.json").read_text())["report"]
    headline = report["recommendations"][0]
    return {"exit": code, "wall_s": wall, **_counts(store, name), **_verdict(headline)}


def _counts(store_path: Path, name: str) -> dict[str, int]:
    store = Store(store_path, create=False)
    try:
        sweep_id = store.sweep_id(name)
        assert sweep_id is not None, f"{store_path} holds no sweep {name}"
        restarts = store.db.execute(
            "SELECT COUNT(*) FROM attempts a JOIN trials t ON t.id = a.trial_id WHERE"
            " t.sweep_id=? AND json_extract(a.timings_json, '$.start_to_ready_s') IS NOT NULL",
            (sweep_id,),
        ).fetchone()[0]
        benches = len(store.trials(sweep_id, ("done",)))
    finally:
        store.close()
    return {"restarts": int(restarts), "benches": int(benches)}


def _copy_store(source: Path, target: Path) -> None:
    """A consistent copy of a closed store (SQLite's backup: its write-ahead log included)."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


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
    parser.add_argument("--predict", action="store_true", help="also predict, then confirm")
    parser.add_argument(
        "--predict-in-grid-store",
        action="store_true",
        help="with --predict: after the grid, predict again in a copy of the grid's store, "
        "with the start spread measured there instead of the spec's",
    )
    parser.add_argument("--no-race", action="store_true", help="skip the race (step 1)")
    args = parser.parse_args()
    dirs = {name: args.out / name for name in ("race", "predict", "grid")}
    for folder in dirs.values():
        folder.mkdir(parents=True, exist_ok=True)
    grid_path = dirs["grid"] / "grid.toml"
    grid_path.write_text(grid_spec(args.spec.read_text(), args.passes))
    parse_spec(grid_path.read_text(), str(grid_path), args.spec.parent.resolve())  # checks it
    figures: dict[str, dict[str, object]] = {}
    if not args.no_race:
        figures["race"] = run(args.spec, dirs["race"])
    if args.predict:
        trace = (dirs["predict"] / "trace").resolve()
        path = dirs["predict"] / "predict.toml"
        path.write_text(predict_spec(args.spec.read_text(), trace))
        traced = record(path, trace)
        figures["predict"] = run(path, dirs["predict"])
        figures["predict"]["wall_s"] = float(figures["predict"]["wall_s"]) + traced  # type: ignore[arg-type]
        print(f"trace recorded in {traced:.0f} s (counted in predict's wall time)")
    figures["grid"] = run(grid_path, dirs["grid"])
    if args.predict and args.predict_in_grid_store:
        folder = args.out / "predict-in-grid-store"
        folder.mkdir(parents=True, exist_ok=True)
        _copy_store(dirs["grid"] / "store.sqlite", folder / "store.sqlite")
        unstated = folder / "predict.toml"
        unstated.write_text(re.sub(r"(?m)^start_spread = .*\n", "", path.read_text()))
        figures["predict-in-grid-store"] = run(unstated, folder)
        figures["predict-in-grid-store"]["wall_s"] += traced  # type: ignore[operator]
    for name, f in figures.items():
        print(
            f"{name}: exit {f['exit']}, {f['wall_s']:.0f} s, {f['restarts']} restarts, "
            f"{f['benches']} benches; {f['status']}: {f['winner']} (leader {f['leader']})"
        )
        print(f"  {f['text']}")
    grid = figures["grid"]
    for name in ("race", "predict", "predict-in-grid-store"):
        if name in figures:
            f = figures[name]
            share = float(f["wall_s"]) / float(grid["wall_s"])  # type: ignore[arg-type]
            print(
                f"{name} wall / grid wall = {share:.0%}; same winner: "
                f"{f['winner'] == grid['winner']}{_by_the_grid(f['winner'], grid, dirs['grid'])}"
            )


def _by_the_grid(pick: object, grid: dict[str, object], folder: Path) -> str:
    """Where the picks differ, the pick as the grid measured it: its throughput over the
    grid's leader, and whether the tolerance's rule (within it, the cheaper config is the
    answer) makes it the grid's answer too."""
    leader = grid["winner"] or grid["leader"]
    if pick is None or pick == leader:
        return ""
    report = json.loads((folder / "report" / "results.json").read_text())["report"]
    configs = {c["label"]: c for c in report["configs"]}
    if pick not in configs or leader not in configs:
        return ""
    mean = {x: configs[x]["metrics"]["throughput_tps"]["mean"] for x in (pick, leader)}
    ratio = mean[pick] / mean[leader]
    tolerance = float(report["options"]["tolerance"])
    cheaper = cost_key(DecodeParams.from_wire(configs[pick]["params"])) < cost_key(
        DecodeParams.from_wire(configs[leader]["params"])
    )
    verdict = (
        "within the tolerance and cheaper: the grid's answer by that rule"
        if cheaper and ratio >= 1 - tolerance
        else "not the grid's answer"
    )
    return f" ({pick} at {ratio:.3f}x of {leader} by the grid's means: {verdict})"


if __name__ == "__main__":
    main()
