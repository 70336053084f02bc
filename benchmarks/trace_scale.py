"""Traces at scale: what a trace costs, what its plan said, how fast a fingerprint is, and a 1T MoE.

    PYTHONPATH=src python benchmarks/trace_scale.py [--device cpu|cuda:0] [--skip-realistic]

Four figures (docs/benchmarks.md "Traces at scale"):

  1. bundled     `ddtune trace record` of the bundled models on held-out prompts,
                 in a child process: seconds per 1,000 traced tokens, measured, and
                 the plan's estimate beside it
  2. realistic   a random model with Qwen3-0.6B's shapes (hidden 1024, 28 layers,
                 16/8 heads of 128, MLP 3072, vocab 151,936, tied embeddings; written
                 here, no download) and a 1-layer DFlash drafter of block 16, traced
                 through the transformers backend in bfloat16 on `--device`: the
                 plan's memory (weights + activations + drafter) against the child's
                 measured peak (CPU: its peak RSS less that of a child that imports
                 the same modules and loads nothing; GPU: torch's peak allocation),
                 and the plan's time against the measured time
  3. fingerprint a Kimi-K2-shaped checkpoint (61 layers, 384 experts of 2048, MLA;
                 packed int4 experts: ~550 GB) written as sparse files (real headers,
                 holes for data): `ddtune.fingerprint` time, cold and again
  4. 1T MoE      the plan of tracing that checkpoint on 8 GPUs of 141 GB (H200) for
                 the bench of examples/sglang-ddtree-systemd.toml: memory per GPU and
                 hours, at assumed H200 rates (no GPU is lent to this run), against
                 the restarts a predicted sweep saves (docs/benchmarks.md
                 "Predict, then confirm": 28 starts / 4.78 h of the production
                 service down to 5 / 1.09 h)

On a GPU machine the same script with `--device cuda:0` measures (2) on it:
`benchmarks/trace_scale_gpu.sh` is the ready command.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from ddtune.fingerprint import model_fingerprint  # noqa: E402
from ddtune.trace.planning.plan import Device, Rates, measured_rates, trace_plan  # noqa: E402

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures")
)  # the fixtures: simulated service, sparse checkpoints
from sparse_checkpoint import moe_tensors, write_sparse_checkpoint  # noqa: E402

REALISTIC = dict(
    vocab_size=151936,
    hidden_size=1024,
    num_layers=28,
    num_heads=16,
    num_kv_heads=8,
    head_dim=128,
    intermediate_size=3072,
    tie_word_embeddings=True,
    drafter_layers=1,
    block_size=16,
    max_position_embeddings=4096,
)
KIMI = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "first_k_dense_replace": 1,
    "n_routed_experts": 384,
    "num_experts_per_tok": 8,
    "n_shared_experts": 1,
    "num_attention_heads": 64,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 163840,
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized"},
}
H200 = Rates(flops=400e12, bandwidth=4.0e12, disk=2e9, source="assumed H200 rates")
PROMPT = "def merge(a, b):\n    out = []\n    while a and b:\n"


def ddtune(*args: str) -> list[str]:
    return [sys.executable, "-m", "ddtune.cli", *args]


def child(argv: list[str]) -> tuple[str, float, float]:
    """(stdout, seconds, peak RSS in bytes) of one command, its own peak (`wait4`)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        text = out.read().decode()
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(argv)} failed:\n{text}\n{err.read().decode()[-4000:]}")
    return text, seconds, usage.ru_maxrss * 1024.0


def bundled(folder: Path) -> None:
    from ddtune.bench.prompts import build_prompt_set

    prompts = build_prompt_set(5151, (4, 100), (2, 320), 3.0)
    texts = [*prompts.short, *prompts.long]
    args = ["trace", "record", "--out", str(folder / "bundled"), "--max-tokens", "64"]
    args += [a for t in texts for a in ("--prompt", t)]
    plan, _, _ = child(ddtune(*args, "--plan-only"))
    out, seconds, _ = child(ddtune(*args, "--threads", "1"))
    print("1. bundled models (ddtune backend, 1 thread), 6 held-out prompts, 64 tokens each:")
    print("   " + [line for line in out.splitlines() if line.startswith("traced")][0])
    print("   plan said: " + [line for line in plan.splitlines() if "time:" in line][0].strip())
    print(f"   wall time of the command, loading included: {seconds:.1f} s")


RECORD_PEAK = """
import json, sys, time, torch
from pathlib import Path
from ddtune.trace.planning.loading import Loading
from ddtune.trace.hf import HfTarget
from ddtune.trace.record import TraceSettings, record_trace
from ddtune.trace.sources import requests_from_prompts
target, drafter, out = map(Path, sys.argv[1:4])
device, prompt_len, max_tokens = sys.argv[4:7]
started = time.perf_counter()
side = HfTarget(target, drafter, Loading(dtype="bfloat16", devices=(device,)))
loaded = time.perf_counter()
prompt = ("abcdefghij " * 1000)[: int(prompt_len)]
requests = requests_from_prompts([prompt], int(max_tokens), ignore_eos=True)
record_trace(side, requests, out, TraceSettings((None,), (), 8))
done = time.perf_counter()
peak = torch.cuda.max_memory_allocated() if device.startswith("cuda") else None
print(json.dumps({"load_s": loaded - started, "trace_s": done - loaded, "gpu_peak": peak}))
"""
WRITE = """
import json, sys
from pathlib import Path
from ddtune.ddtree.testing import write_random_checkpoint
write_random_checkpoint(Path(sys.argv[1]), seed=1, std=0.02, **json.loads(sys.argv[2]))
"""
BASELINE = """
import torch, transformers
from ddtune.trace.hf import HfTarget
from ddtune.trace.record import record_trace
"""


def realistic(folder: Path, device: str, prompt_len: int = 512, max_tokens: int = 32) -> None:
    from ddtune.trace.planning.plan import these_devices

    # written by a child: a parent holding the random weights would lend its RSS to every
    # child it forks (a forked child's peak counts the pages it shares before exec)
    _, written, _ = child(
        [sys.executable, "-c", WRITE, str(folder / "realistic"), json.dumps(REALISTIC)]
    )
    target, drafter = folder / "realistic" / "target", folder / "realistic" / "drafter"
    _bf16_config(target)
    length = prompt_len + max_tokens + REALISTIC["block_size"]
    devices = these_devices([device], {}) if device.startswith("cuda") else [Device("cpu", 64e9)]
    plan = trace_plan(
        target,
        drafter,
        "bfloat16",
        longest=length,
        tokens=length,
        continuation=max_tokens,
        generated=max_tokens + REALISTIC["block_size"],
        views=1,
        query_length=REALISTIC["block_size"],
        devices=devices,
        rates=measured_rates(),
    )
    planned = plan.place()[device]
    out, _, peak = child(
        [
            sys.executable,
            "-c",
            RECORD_PEAK,
            str(target),
            str(drafter),
            str(folder / "realistic-trace"),
            device,
            str(prompt_len),
            str(max_tokens),
        ]
    )
    measured = json.loads(out.strip().splitlines()[-1])
    _, _, base = child([sys.executable, "-c", BASELINE])
    used = measured["gpu_peak"] if measured["gpu_peak"] is not None else peak - base
    s = plan.seconds()
    print(
        f"2. random Qwen3-0.6B-shaped model (written in {written:.0f} s), bfloat16 on {device}, "
        f"one {prompt_len}-token prompt + {max_tokens} tokens:"
    )
    print(
        f"   plan {planned / 1e9:.2f} GB (weights {plan.target.load_bytes / 1e9:.2f}, "
        f"activations {plan.activation_bytes() / 1e9:.2f}, drafter {plan.drafter_bytes() / 1e9:.2f}, "
        f"loading peak {plan.loading_bytes() / 1e9:.2f}); "
        f"measured peak {used / 1e9:.2f} GB"
        + (
            ""
            if measured["gpu_peak"]
            else f" (RSS {peak / 1e9:.2f} less {base / 1e9:.2f} of imports)"
        )
        + f": plan / measured = {planned / used:.2f}"
    )
    print(
        f"   time: plan load {s['load']:.0f} s + work {s['greedy'] + s['forward']:.0f} s; "
        f"measured load {measured['load_s']:.0f} s + trace {measured['trace_s']:.0f} s"
    )


def _bf16_config(target: Path) -> None:
    config = json.loads((target / "config.json").read_text())
    config["torch_dtype"] = "bfloat16"
    (target / "config.json").write_text(json.dumps(config, indent=1))


def fingerprint_and_moe(folder: Path) -> None:
    kimi = folder / "kimi-k2-shaped"
    started = time.perf_counter()
    write_sparse_checkpoint(kimi, KIMI, _packed(moe_tensors(KIMI, "I32")))
    written = time.perf_counter() - started
    shards = list(kimi.glob("*.safetensors"))
    size = sum(p.stat().st_size for p in shards)
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        fp = model_fingerprint(kimi)
        times.append(time.perf_counter() - t0)
    print(
        f"3. fingerprint of a Kimi-K2-shaped checkpoint: {size / 1e9:.0f} GB in {len(shards)} "
        f"shards (sparse, written in {written:.0f} s): {times[0]:.2f} s, again {times[1]:.2f} s "
        f"({fp.short()}); the full sha256 reads every byte: {size / 1e9 / 1.0 / 60:.0f} min "
        "at 1 GB/s"
    )
    moe_plan(kimi)


def _packed(tensors: list[tuple[str, str, list[int]]]) -> list[tuple[str, str, list[int]]]:
    """Experts as compressed-tensors packs them: int4 eight to an int32 word."""
    return [(n, d, [s[0], s[1] // 8]) if d == "I32" else (n, d, s) for n, d, s in tensors]


def moe_plan(kimi: Path) -> None:
    from ddtune.bench.runner import measured_requests
    from ddtune.sweep.plan import read_spec

    spec = read_spec(REPO / "examples" / "sglang-ddtree-systemd.toml")
    _, requests = measured_requests(spec.bench)
    block = 16
    lengths = [len(r.prompt) // 3 + r.max_tokens + block for r in requests]  # ~3.5 chars a token
    gpus = [Device(f"cuda:{i}", 141e9) for i in range(8)]
    for generated, how in (
        (sum(r.max_tokens + block for r in requests), "greedy decoded by the trace"),
        (0, "continuations from the service (--store)"),
    ):
        plan = trace_plan(
            kimi,
            kimi_drafter(kimi.parent),
            "bfloat16",
            longest=max(lengths),
            tokens=sum(lengths),
            continuation=sum(r.max_tokens for r in requests),
            generated=generated,
            views=2,
            query_length=block,
            devices=gpus,
            rates=H200,
        )
        placed, s = plan.place(), plan.seconds()
        hours = sum(s.values()) / 3600
        print(
            f"4. 1T MoE on 8 x H200, {len(requests)} requests ({sum(lengths)} tokens), {how}: "
            f"GPU 0 {placed['cuda:0'] / 1e9:.0f} GB, others {placed['cuda:1'] / 1e9:.0f} GB of 141; "
            f"load {s['load'] / 60:.0f} min, greedy {s['greedy'] / 60:.0f} min, forwards "
            f"{s['forward'] / 60:.1f} min: {hours:.2f} h"
        )
    print(
        "   against: 28 starts / 4.78 h of the production service for a race, 5 / 1.09 h "
        "predicted (docs/benchmarks.md 'Predict, then confirm'): 3.7 h of production saved "
        "for the hours above of one 8-GPU node"
    )


def kimi_drafter(folder: Path) -> Path:
    """A DFlash drafter of Kimi's width (3 layers, block 16), sparse."""
    from sparse_checkpoint import dense_tensors

    config = {
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "num_hidden_layers": 3,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 163840,
        "tie_word_embeddings": True,
        "block_size": 16,
    }
    tensors = [t for t in dense_tensors(config) if "embed_tokens" not in t[0]]
    tensors.append(("fc.weight", "BF16", [7168, 7168 * 5]))
    return write_sparse_checkpoint(folder / "kimi-drafter", config, tensors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="where the realistic model runs")
    parser.add_argument("--skip-realistic", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trace-scale-") as tmp:
        folder = Path(tmp)
        if args.device == "cpu":
            bundled(folder)
        if not args.skip_realistic:
            realistic(folder, args.device)
        fingerprint_and_moe(folder)


if __name__ == "__main__":
    main()
