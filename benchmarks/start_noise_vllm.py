"""How much does one server start move a config's level here, and how many starts does a verdict need?

    python benchmarks/start_noise_vllm.py --out runs/start-noise      # ~12 min on 2 cores

Runs `examples/vllm-ngram-predict-cpu.toml` as a grid of two configs, plain decoding and one
n-gram config (`--k`, `--lookup`), each started `--starts` times with `--benches` benches per
start, interleaved, every bench also timing forwards over 1, 8, 32 and 64 tokens on the running
server (`[bench] forward_probes`). It then reads the store as the restart-bound race reads its
own benches and prints:

1. the spread of one bench inside a start and of one start's level (log-sd, the race's own
   model, without a start prior: `spread.sweep_components`, as a later sweep's measured spread);
2. whether a start's timed forwards predict its level: within each config, the regression of
   a start's mean log tok/s on its mean log forward time (the correlation, the slope, and the
   spread of a start's level left once the forwards are accounted for);
3. the starts per config a verdict needs at gaps of 5-30% between two configs, at this
   spread: the number at which the expected gap reaches the race's separation level
   (`by_start.ALPHA`, two-sided), with and without the forwards' share removed.

Nothing here is simulated: the servers, the benches and the probes are ddtune's sweep against
the installed vLLM. docs/benchmarks.md "How much a start moves a config here".
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from statistics import NormalDist, fmean

import numpy as np

from ddtune.records import TrialRecord
from ddtune.sweep.plan.passes import objective_value
from ddtune.sweep.plan.races.by_start import ALPHA
from ddtune.sweep.plan.spread import config_starts, sweep_components
from ddtune.sweep.store.db import Store

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "vllm-ngram-predict-cpu.toml"
PROBES = [1, 8, 32, 64]
GAPS = (0.05, 0.10, 0.15, 0.20, 0.30)


def write_spec(args: argparse.Namespace, out: Path) -> Path:
    """The example as a grid of ar and one n-gram config, forwards timed on every bench."""
    text = EXAMPLE.read_text().replace('cwd = "."', f'cwd = "{REPO}"')

    def sub(key: str, value: object, text: str) -> str:  # the first `key = ...` line
        return re.sub(rf"^{key} = .*$", f"{key} = {value}", text, count=1, flags=re.M)

    text = sub("name", '"start-noise"', sub("strategy", '"grid"\norder = "interleaved"', text))
    text = sub("repeats", f"{args.starts * args.benches}\npasses_per_start = {args.benches}", text)
    text = sub(
        "num_draft_tokens", f"[{args.k}]", sub("prompt_lookup_max", f"[{args.lookup}]", text)
    )
    text = text.replace("[bench]\n", f"[bench]\nforward_probes = {PROBES}\n", 1)
    spec = out / "start-noise.toml"
    spec.write_text(re.sub(r"^port = \d+", f"port = {args.port}", text, flags=re.M))
    return spec


def run_sweep(spec: Path, store: Path) -> None:
    command = [sys.executable, "-m", "ddtune.cli", "sweep", "run", str(spec), "--store", str(store)]
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    (store.parent / "sweep.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        sys.exit(f"the sweep exited {done.returncode}: {store.parent / 'sweep.log'}")


def forward_level(record: TrialRecord) -> float | None:
    """The mean over probed lengths of the log median seconds of a forward (None: no probes)."""
    by_n: dict[int, list[float]] = {}
    for probe in record.forward_probes or ():
        by_n.setdefault(int(probe["tokens"]), []).append(float(probe["seconds"]))
    if not by_n:
        return None
    return fmean(math.log(float(np.median(v))) for v in by_n.values())


def analyse(store_path: Path) -> None:
    store = Store(store_path, read_only=True)
    sweep_id, objective = store.sweep_ids()[-1], "throughput"
    found = sweep_components(store, sweep_id, objective)
    if found is None:
        sys.exit(f"{store_path}: no config of its last sweep started twice")
    parts, means = found
    # the same starts with their trials, in the same order, for each start's timed forwards
    starts = config_starts(store, sweep_id, lambda r: objective_value(r, objective) is not None)
    benches = round(fmean(m.benches for m in means))
    print(f"{len(means)} starts, {sum(m.benches for m in means)} benches, objective {objective}")
    print(f"  a bench inside a start: {parts.bench.sd:.1%} (log-sd, {parts.bench.df:.0f} df)")
    print(f"  a start's level:        {parts.start.sd:.1%} ({parts.start.df:.0f} df)")
    print(f"  drift:                  {parts.drift.sd:.1%} an hour")
    for label in dict.fromkeys(m.label for m in means):
        levels = [f"{math.exp(m.log_mean):.0f}" for m in means if m.label == label]
        print(f"  {label}: start levels {', '.join(levels)} tok/s")

    ys, xs = [], []  # within each config: a start's level and its forward time, centred
    for label in dict.fromkeys(m.label for m in means):
        rows = [
            (m.log_mean, fmean(f))
            for m, (_, runs) in zip(means, starts, strict=True)
            if m.label == label
            and (f := [v for r, _ in runs if (v := forward_level(r)) is not None])
        ]
        if len(rows) >= 2:
            y, x = np.array(rows).T
            ys += list(y - y.mean())
            xs += list(x - x.mean())
    y, x = np.array(ys), np.array(xs)
    slope = float(x @ y / (x @ x)) if len(x) >= 3 and x @ x > 0 else 0.0
    corr = float(np.corrcoef(x, y)[0, 1]) if len(x) >= 3 else float("nan")
    dof = max(len(y) - len({m.label for m in means}), 1)
    before = math.sqrt(float(y @ y) / dof)
    after = math.sqrt(float((y - slope * x) @ (y - slope * x)) / max(dof - 1, 1))
    print("a start's timed forwards against its level (within each config):")
    print(f"  correlation {corr:.2f}, slope {slope:.2f} (log tok/s per log second)")
    print(
        f"  a start's mean level spreads {before:.1%}; with the forwards' share removed {after:.1%}"
    )

    z = NormalDist().inv_cdf(1 - ALPHA / 2)
    print(
        f"starts per config for a verdict at the race's level ({ALPHA}, two-sided), {benches} "
        "bench(es) a start:"
    )
    for name, spread in (("as measured", before), ("forwards removed", after)):
        needs = [max(1, math.ceil(2 * (z * spread / math.log1p(g)) ** 2)) for g in GAPS]
        cells = ", ".join(f"{g:.0%} apart: {n}" for g, n in zip(GAPS, needs, strict=True))
        print(f"  {name}: {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/start-noise"))
    parser.add_argument("--starts", type=int, default=4, help="starts per config")
    parser.add_argument("--benches", type=int, default=4, help="benches per start")
    parser.add_argument("--k", type=int, default=6, help="the n-gram config's num_draft_tokens")
    parser.add_argument("--lookup", type=int, default=2, help="... and its prompt_lookup_max")
    parser.add_argument("--port", type=int, default=18761)
    parser.add_argument("--analyse-only", action="store_true", help="read --out's store only")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    store = args.out / "store.sqlite"
    if not args.analyse_only:
        if store.exists():
            sys.exit(f"{store} exists: pass another --out, or --analyse-only to read it")
        run_sweep(write_spec(args, args.out), store)
    analyse(store)


if __name__ == "__main__":
    main()
