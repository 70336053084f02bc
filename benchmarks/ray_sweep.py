"""Distributed sweeps on a local Ray cluster vs the local backend: wall time and overhead.

    PYTHONPATH=src python benchmarks/ray_sweep.py [--budgets 4 8 16] [--repeats 4]
        [--token-delay 0.3] [--out runs/bench-ray]

Runs the same sweep (a fake server whose response time is sleeping:
tests/sweep/run/ray/sleepy_server.py) three times: `backend = "local"`, then
`backend = "ray"` with 1 slot, then with 2 slots (two ports, schedule by_pass),
on one local Ray cluster started here (2 CPUs, no dashboard; its start-up is
printed on its own). It prints, from the stores' own timestamps:

    2 slots vs local   same completed trials and T=0 outputs; wall time ratio of the
                       whole run (slot actors started and closed included) and of
                       the trial loop (first attempt start → last attempt end)
    1 slot vs local    Ray's overhead per trial, as a share of the local trial time:
                       (ray − local) / trials, for the whole run and the trial loop

See docs/benchmarks.md "Scale out with Ray (one machine)".
"""

from __future__ import annotations

import argparse
import io
import socket
import sqlite3
import sys
import time
from pathlib import Path

from rich.console import Console

from ddtune.sweep.plan import read_spec
from ddtune.sweep.run.loop import run_sweep

SERVER = Path(__file__).resolve().parent.parent / "tests" / "sweep" / "cluster" / "sleepy_server.py"
TEMPLATE = """
[sweep]
name = "bench-ray"
repeats = {repeats}
order = "interleaved"
[space]
mode = ["ddtree"]
budget = {budgets}
topk = [2]
[service]
command = ["{python}", "{server}", "--port", "{{port}}", "--mode", "{{mode}}", "--budget",
           "{{budget}}", "--topk", "{{topk}}", "--window", "{{window}}", "--token-delay", "{delay}"]
port = {port}
generations = 1
gpu = "off"
[service.timeouts]
stop = 5
quiesce = 10
[bench]
warmup = 0
chars_per_token = 1.0
[bench.short]
n_prompts = 2
prompt_tokens = 20
max_tokens = 8
repeats = 1
[bench.long]
n_prompts = 1
prompt_tokens = 40
max_tokens = 8
repeats = 1
[bench.coding]
enabled = false
[retry]
attempts = 1
backoff = 0
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spec_text(args: argparse.Namespace, slots: int) -> str:
    text = TEMPLATE.format(
        repeats=args.repeats,
        budgets=list(args.budgets),
        python=sys.executable,
        server=SERVER,
        delay=args.token_delay,
        port=free_port(),
    )
    if slots:
        text += '[cluster]\nbackend = "ray"\naddress = "local"\n'
        for i in range(slots):
            text += f'[[cluster.slots]]\nname = "s{i}"\nservice = {{ port = {free_port()} }}\n'
    return text


def run(folder: Path, text: str) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spec.toml").write_text(text)
    store = folder / "store.sqlite"
    started = time.monotonic()
    summary = run_sweep(read_spec(folder / "spec.toml"), store, Console(file=io.StringIO()))
    wall = time.monotonic() - started
    db = sqlite3.connect(store)
    start, end = db.execute("SELECT MIN(started_at), MAX(ended_at) FROM attempts").fetchone()
    outputs = dict(
        ((label, rep), out)
        for label, rep, out in db.execute(
            "SELECT t.label, t.repeat, r.outputs_json FROM trials t JOIN results r ON r.trial_id=t.id"
        )
    )
    db.close()
    return {"wall": wall, "loop": end - start, "done": summary.done, "outputs": outputs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--token-delay", type=float, default=0.3)
    parser.add_argument("--out", type=Path, default=Path("runs/bench-ray"))
    args = parser.parse_args()
    import ray

    started = time.monotonic()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="warning")
    print(f"local Ray cluster started in {time.monotonic() - started:.1f} s (once, not counted)")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    try:
        local = run(args.out / stamp / "local", spec_text(args, 0))
        one = run(args.out / stamp / "ray-1", spec_text(args, 1))
        two = run(args.out / stamp / "ray-2", spec_text(args, 2))
    finally:
        ray.shutdown()
    report(local, one, two)


def report(local: dict, one: dict, two: dict) -> None:
    n = local["done"]
    same = local["outputs"] == two["outputs"] == one["outputs"] and len(local["outputs"]) == n
    print(f"trials: {n} per run; completed sets and T=0 outputs identical: {same}")
    for name, r in (("local", local), ("ray 1 slot", one), ("ray 2 slots", two)):
        print(f"  {name:12s} whole run {r['wall']:6.1f} s, trial loop {r['loop']:6.1f} s")
    print(
        f"2 slots / local: whole run {two['wall'] / local['wall']:.2f}x, "
        f"trial loop {two['loop'] / local['loop']:.2f}x"
    )
    trial = local["loop"] / n
    for what in ("wall", "loop"):
        extra = (one[what] - local[what]) / n
        label = "whole run" if what == "wall" else "trial loop"
        print(
            f"1 slot overhead per trial ({label}): {extra * 1000:+.0f} ms "
            f"= {extra / trial:+.1%} of the local trial time ({trial:.2f} s)"
        )


if __name__ == "__main__":
    main()
