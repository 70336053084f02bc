"""Head to head on vLLM (CPU, bundled target): `vllm bench sweep serve` against `ddtune sweep run`
over the same space: n-gram's K (num_speculative_tokens) in --ks x prompt_lookup_max in --maxes
(default 1, 2, 4, 6 x 2, 4: 8 configs), or with `--method dflash` vLLM's DFlash over the
bundled drafter at K in --ks (default 1..7: 7 configs).

vllm: `vllm bench sweep serve` starts a server per `--serve-params` combination (one per
config: the speculative config as a JSON value) and runs `vllm bench serve` (random prompts,
`--num-prompts`, `--max-concurrency`) `--num-runs` times (3 by default); its answer here is
the config with the highest mean output tok/s (it names none itself, and gives no interval).
ddtune: `ddtune sweep run` of examples/vllm-ngram-predict-cpu.toml with the same configs,
strategy "predict" without a trace: the baseline's T = 0 answers predict every n-gram
config, the timed forwards on the running baseline what a round costs, and only the
configs that could still win are started to confirm. DFlash's drafts depend on K, so
there ddtune runs examples/vllm-dflash-predict-cpu.toml with a trace it records first
(`ddtune trace record --spec`, counted in its wall time). Prints per tool: wall time, server
starts, the answer (ddtune's with its verdict), whether the two answers agree (the same
config, or within ddtune's tolerance on vLLM's own figures), and ddtune's T = 0 check of
every started config against plain decoding.

    PYTHONPATH=src python benchmarks/head_to_head_vllm.py [--method ngram|dflash]
        [--ks 1,2,4,6] [--maxes 2,4] [--num-runs 3] [--num-prompts 8] [--max-concurrency 4] [--out runs/head-to-head]

Servers listen on loopback. Needs .venv-vllm (docs/engines.md). Minutes per config on 2 cores;
run it on a quiet machine (both tools see the same load only if nothing else runs).
Results: docs/benchmarks.md "Head to head: `vllm bench sweep serve` and ddtune on vLLM".
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VLLM_PY = REPO / ".venv-vllm" / "bin" / "python"
MODEL = REPO / "src" / "ddtune" / "assets" / "models" / "target"
DRAFTER = REPO / "src" / "ddtune" / "assets" / "models" / "drafter"
EXAMPLES = {
    "ngram": REPO / "examples" / "vllm-ngram-predict-cpu.toml",
    "dflash": REPO / "examples" / "vllm-dflash-predict-cpu.toml",
}
BENCH_SERVE = (
    "from vllm.utils.argparse_utils import FlexibleArgumentParser as P; "
    "from vllm.benchmarks.serve import add_cli_args, main; p = P(); add_cli_args(p); "
    "main(p.parse_args())"
)
ENV = "VLLM_SERVER_DEV_MODE=1 VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=1 HF_HUB_OFFLINE=1"


def speculative(method: str, k: int, most: int) -> dict:
    """vLLM's `--speculative-config` for one config (`most`: n-gram's prompt_lookup_max)."""
    if method == "dflash":
        return {"method": "dflash", "num_speculative_tokens": k, "model": str(DRAFTER)}
    return {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": most}


def configs(args: argparse.Namespace) -> list[tuple[int, int]]:
    """(K, prompt_lookup_max) per config; DFlash has no lookup (0)."""
    maxes = args.maxes if args.method == "ngram" else [0]
    return [(k, m) for k in args.ks for m in maxes]


def run_vllm_sweep(args: argparse.Namespace, out: Path) -> Outcome:
    port = args.port
    serve = (
        f"{VLLM_PY} -m vllm.entrypoints.openai.api_server --model {MODEL} --host 127.0.0.1 "
        f"--port {port} --served-model-name target --max-model-len 512 --dtype float32 "
        "--max-num-seqs 4"
    )
    bench = (  # `vllm bench serve` (the `vllm` entry point of vllm-cpu lacks its metadata)
        f"{VLLM_PY} -c {shlex.quote(BENCH_SERVE)} --backend openai --host 127.0.0.1 "
        f"--port {port} --model target --tokenizer {MODEL} --dataset-name random "
        f"--random-input-len 100 --random-output-len 48 --num-prompts {args.num_prompts} "
        f"--max-concurrency {args.max_concurrency} --temperature 0"
    )
    params = [{"speculative_config": speculative(args.method, k, m)} for k, m in configs(args)]
    (out / "serve_params.json").write_text(json.dumps(params))
    argv = [str(VLLM_PY), "-m", "vllm.benchmarks.sweep.serve"]  # `vllm bench sweep serve`
    argv += ["--serve-cmd", serve, "--bench-cmd", bench, "--serve-params"]
    argv += [str(out / "serve_params.json"), "--num-runs", str(args.num_runs), "-o", str(out)]
    argv += ["-e", "vllm-sweep"]
    # it resets caches between runs itself only for a command named `vllm` (dev-mode endpoint)
    argv += ["--after-bench-cmd", f"curl -sf -X POST http://127.0.0.1:{port}/reset_prefix_cache"]
    started = time.monotonic()
    done = subprocess.run(
        ["env", *shlex.split(ENV), *argv], capture_output=True, text=True, cwd=REPO
    )
    wall = time.monotonic() - started
    (out / "vllm-sweep.log").write_text(done.stdout + done.stderr)
    rows = _vllm_rows(out / "vllm-sweep")
    if not rows:
        return Outcome(wall, len(params), f"failed (exit {done.returncode})", {}, [])
    answer, means, lines = _vllm_answer(rows)
    if done.returncode != 0:  # e.g. vllm-cpu lacks pandas: every run measured, no summary.csv
        answer += f" (the sweep exited {done.returncode} after its runs; {out / 'vllm-sweep.log'})"
    return Outcome(wall, len(params), answer, means, lines)


def _vllm_rows(experiment: Path) -> list[dict]:
    """The sweep's run records: summary.csv, else (it is written with pandas, which vllm-cpu
    does not install) the summary.json each server combination leaves, which hold the same."""
    if (experiment / "summary.csv").exists():
        return list(csv.DictReader((experiment / "summary.csv").open()))
    return [
        row for f in sorted(experiment.glob("*/summary.json")) for row in json.loads(f.read_text())
    ]


def _vllm_answer(rows: list[dict]) -> tuple[str, dict[tuple[int, int], float], list[str]]:
    """The config with the best mean output throughput over the runs, every config's mean,
    and what each config's runs hold."""
    by: dict[tuple[int, int], list[dict]] = {}
    for row in rows:
        text = str(row.get("speculative_config", ""))
        k = re.search(r"""['"]num_speculative_tokens['"]: (\d+)""", text)
        most = re.search(r"""['"]prompt_lookup_max['"]: (\d+)""", text)
        key = (int(k.group(1)) if k else 0, int(most.group(1)) if most else 0)
        by.setdefault(key, []).append(row)
    means = {key: _mean(r, "output_throughput") for key, r in by.items()}
    best = max(means, key=means.__getitem__)
    lines = [
        f"{_name(key)}: {m:.1f} tok/s mean of {len(by[key])} runs "
        f"({', '.join(_tps(r) for r in by[key])}); "
        f"acceptance length {_mean(by[key], 'spec_decode_acceptance_length'):.2f}"
        for key, m in sorted(means.items())
    ]
    return f"{_name(best)} (highest mean output tok/s; no interval, no verdict)", means, lines


def _name(key: tuple[int, int]) -> str:
    return f"K={key[0]}" + (f" lookup<={key[1]}" if key[1] else "")


def _tps(row: dict) -> str:
    return f"{float(row['output_throughput']):.1f}"


def _mean(rows: list[dict], key: str) -> float:
    values = [float(r[key]) for r in rows if r.get(key) not in (None, "")]
    return sum(values) / len(values) if values else float("nan")


@dataclass
class Outcome:
    wall: float
    starts: int
    answer: str
    means: dict[tuple[int, int], float]  # vLLM: (K, lookup max) -> mean tok/s
    lines: list[str]
    pick: tuple[int, int] | None = None  # ddtune's answer as (K, lookup max); None: plain


def run_ddtune(args: argparse.Namespace, out: Path) -> Outcome:
    text = EXAMPLES[args.method].read_text().replace('cwd = "."', f'cwd = "{REPO}"')
    sub = lambda key, value, t: re.sub(rf"^{key} = .*$", f"{key} = {value}", t, flags=re.M)  # noqa: E731
    if args.method == "dflash":  # K draft tokens: a block of K + 1
        text = sub("block_size", [k + 1 for k in args.ks], text)
        trace = (out / "trace").resolve()  # a spec's relative paths are read from its folder
        text = sub("drafter", f'"{DRAFTER}"', sub("trace", f'"{trace}"', text))
    else:
        text = sub("prompt_lookup_max", args.maxes, sub("num_draft_tokens", args.ks, text))
    spec = out / "ddtune-h2h.toml"
    spec.write_text(re.sub(r"^port = \d+", f"port = {args.port + 1}", text, flags=re.M))
    store = out / "ddtune" / "store.sqlite"
    ddtune = [sys.executable, "-m", "ddtune.cli"]
    env = {**os.environ, "COLUMNS": "400"}  # the answer's lines unwrapped
    said = ""
    started = time.monotonic()
    if args.method == "dflash":
        record = [*ddtune, "trace", "record", "--spec", str(spec), "--out", str(out / "trace")]
        done = subprocess.run(record, capture_output=True, text=True, cwd=REPO, env=env)
        said = done.stdout + done.stderr
    run = [*ddtune, "sweep", "run", str(spec), "--store", str(store)]
    done = subprocess.run(run, capture_output=True, text=True, cwd=REPO, env=env)
    wall = time.monotonic() - started
    said += done.stdout + done.stderr
    (out / "ddtune-sweep.log").write_text(said)
    answer = next(
        (line for line in said.splitlines() if line.startswith("Throughput")),
        f"no answer (exit {done.returncode}; {out / 'ddtune-sweep.log'})",
    )
    starts = re.search(r"restart-bound race: \d+ pass\(es\), (\d+) start\(s\)", said)
    rows = list(csv.DictReader((store.parent / "report" / "results.csv").open()))
    lines = [
        f"{r['label']}: {_cell(r, 'throughput_tps_mean', '.1f')} tok/s "
        f"[{_cell(r, 'throughput_tps_low', '.1f')}, {_cell(r, 'throughput_tps_high', '.1f')}] "
        f"over {r.get('done') or 0} bench(es), acceptance {_cell(r, 'acceptance_length_mean', '.3f')}, "
        f"T = 0 vs plain: {r.get('lossless') or '-'}"
        for r in rows
    ]
    named = re.match(r"Throughput: (?:Leaning )?([^:;]+?)(?::| is | —|$)", answer)
    leader = named.group(1) if named else ""  # the answer's config (or the one it leans to)
    k = re.search(r"num_draft_tokens=(\d+)", leader)
    most = re.search(r"prompt_lookup_max=(\d+)", leader)
    block = re.search(r"block_size=(\d+)", leader)
    pick = (int(k.group(1)), int(most.group(1))) if k and most else None
    pick = (int(block.group(1)) - 1, 0) if block else pick
    return Outcome(wall, int(starts.group(1)) if starts else -1, answer, {}, lines, pick)


def _cell(row: dict, key: str, spec: str) -> str:
    value = row.get(key)
    return "-" if value in (None, "") else format(float(value), spec)


def agreement(vllm: Outcome, ddtune: Outcome, tolerance: float) -> str:
    """Do the answers agree: the same config, or ddtune's within its tolerance of vLLM's best on
    vLLM's own means?"""
    if not vllm.means:
        return "not comparable (vLLM's sweep measured nothing)"
    if ddtune.pick is None:
        return "no: ddtune names (or leans to) plain decoding; vLLM's sweep has no plain run"
    best = max(vllm.means, key=vllm.means.__getitem__)
    if ddtune.pick == best:
        return f"yes: both name {_name(best)}"
    ratio = vllm.means.get(ddtune.pick, float("nan")) / vllm.means[best]
    within = ratio >= 1 - tolerance
    return (
        f"{'yes' if within else 'no'}: ddtune names {_name(ddtune.pick)}, at {ratio:.1%} of "
        f"vLLM's best ({_name(best)}) on vLLM's own means ({'within' if within else 'outside'} "
        f"ddtune's {tolerance:.0%} tolerance)"
    )


DEFAULT_KS = {"ngram": "1,2,4,6", "dflash": "1,2,3,4,5,6,7"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--method", choices=("ngram", "dflash"), default="ngram")
    p.add_argument("--ks", help="num_speculative_tokens values (ngram: 1,2,4,6; dflash: 1..7)")
    p.add_argument("--maxes", default="2,4", help="prompt_lookup_max values")
    p.add_argument("--num-runs", type=int, default=3)
    p.add_argument("--num-prompts", type=int, default=8)
    p.add_argument("--max-concurrency", type=int, default=4)
    p.add_argument("--port", type=int, default=18790)
    p.add_argument("--only", default="vllm,ddtune", help="which tools to run, in order")
    p.add_argument("--out", type=Path, default=REPO / "runs" / "head-to-head")
    args = p.parse_args()
    args.ks = [int(k) for k in (args.ks or DEFAULT_KS[args.method]).split(",")]
    args.maxes = [int(m) for m in args.maxes.split(",")]
    if not VLLM_PY.exists():
        raise SystemExit(f"{VLLM_PY} is missing: install vLLM as docs/engines.md says")
    args.out.mkdir(parents=True, exist_ok=True)
    runners = {"vllm": ("vllm bench sweep serve", run_vllm_sweep), "ddtune": ("ddtune", run_ddtune)}
    done: dict[str, Outcome] = {}
    for key in args.only.split(","):
        name, runner = runners[key]
        outcome = done[key] = runner(args, args.out)
        print(
            f"{name}: {outcome.wall:.0f} s wall, {outcome.starts} server start(s); answer: {outcome.answer}"
        )
        for line in outcome.lines:
            print(f"  {line}")
    if {"vllm", "ddtune"} <= set(done):
        ratio = done["ddtune"].wall / done["vllm"].wall
        print(f"ddtune / vllm wall: {ratio:.2f}")
        print(f"answers agree: {agreement(done['vllm'], done['ddtune'], 0.05)}")


if __name__ == "__main__":
    main()
