"""Single-stream tok/s: ddtune's engine against the DDTree reference implementation.

    PYTHONPATH=src python benchmarks/ddtree_reference.py /path/to/ddtree-checkout \
        [--venv DIR] [--budgets 8,16,32] [--max-tokens 64] [--prompts 4] [--repeats 2] \
        [--threads 1]

The reference (github.com/liranringel/ddtree, NOT vendored: pass the path of
your own checkout) runs in a venv of its own (default `<checkout>/.venv-ddtune`,
created on first use; `--torch-index URL` picks where its torch comes from,
e.g. the CPU wheels at https://download.pytorch.org/whl/cpu) with the same
torch version as ours, transformers
4.57.1 and the reference's light dependencies, on the CPU: the target with
`sdpa` attention, the drafter with `sdpa` instead of flash-attention, both in
float32, the C++ cache compaction off, and `torch.cuda.synchronize` (its only
CUDA call, in its timer) a no-op. It is a subprocess that takes one job
(config and prompts) at a time over stdin, so the two engines run on the
same prompts (ddtune's bundled models and held-out prompts, no stop tokens,
T=0) alternating prompt by prompt: the side that goes first swaps every
prompt and every repeat, so both meet the same machine state.

Each side's tok/s = generated tokens / wall seconds of its generate calls
(prefill included), and per CPU-second of its process over the same calls
(with one thread the idle-core speed; the ratio to trust on a busy
machine). The table shows both, the ratio, both taus and whether the
outputs are identical; with 2+ repeats each repeat's ratio on its own
follows (how far one run's figure moves). See docs/performance.md.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SIDES = ("reference", "ddtune")
REFERENCE_PACKAGES = [
    "transformers==4.57.1",
    "datasets",
    "loguru",
    "numpy",
    "tqdm",
    "typing_extensions",
]

# Runs inside the reference venv: reads one JSON config per line, answers one JSON line.
RUNNER = r"""
import json, sys, time
import torch
checkout, target_dir, drafter_dir, threads = sys.argv[1:5]
torch.set_num_threads(int(threads))
torch.cuda.synchronize = lambda *args, **kwargs: None  # the reference's timer calls it
sys.path.insert(0, checkout)
from transformers import AutoModelForCausalLM
import ddtree
from dflash import dflash_generate
from model import DFlashDraftModel
ddtree.maybe_enable_cpp_compact(False)
target = AutoModelForCausalLM.from_pretrained(
    target_dir, attn_implementation="sdpa", dtype=torch.float32).eval()
draft = DFlashDraftModel.from_pretrained(
    drafter_dir, attn_implementation="sdpa", dtype=torch.float32).eval()
print(json.dumps({"ready": True, "block_size": draft.block_size}), flush=True)
for line in sys.stdin:
    job = json.loads(line)
    outputs, taus, seconds, cpu = [], [], 0.0, 0.0
    with torch.inference_mode():
        for ids in job["prompts"]:
            args = dict(model=draft, target=target, input_ids=torch.tensor([ids]),
                        mask_token_id=draft.mask_token_id, max_new_tokens=job["max_tokens"],
                        stop_token_ids=None, temperature=0.0)
            start, cpu0 = time.perf_counter(), time.process_time()
            if job["mode"] == "ar":
                out = dflash_generate(block_size=1, **args)
            elif job["mode"] == "dflash":
                out = dflash_generate(block_size=draft.block_size, **args)
            else:
                out = ddtree.ddtree_generate(block_size=draft.block_size,
                                             tree_budget=job["budget"], **args)
            seconds += time.perf_counter() - start
            cpu += time.process_time() - cpu0
            outputs.append(out.output_ids[0, len(ids):].tolist())
            taus += list(out.acceptance_lengths)
    print(json.dumps({"outputs": outputs, "seconds": seconds, "cpu": cpu, "acceptance": taus}),
          flush=True)
"""


def ensure_venv(venv: Path, torch_version: str, torch_index: str | None) -> Path:
    """The reference venv's python, creating the venv and installing into it if needed."""
    python = venv / "bin" / "python"
    stamp = venv / ".ddtune-reference-installed"
    if stamp.is_file():
        return python
    print(f"creating the reference venv {venv} (torch {torch_version}, transformers 4.57.1)")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    index = ["--index-url", torch_index] if torch_index else []  # else pip's own config
    subprocess.run([*pip, f"torch=={torch_version}", *index], check=True)
    subprocess.run([*pip, *REFERENCE_PACKAGES], check=True)
    stamp.write_text("ok\n")
    return python


class Reference:
    """The reference implementation in its own venv, one config per request."""

    def __init__(self, python: Path, checkout: Path, target: Path, drafter: Path, threads: int):
        argv = [str(python), "-c", RUNNER, str(checkout), str(target), str(drafter), str(threads)]
        env = {"OMP_NUM_THREADS": str(threads), "PATH": "/usr/bin:/bin"}
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        hello = self._read()
        self.block_size = int(hello["block_size"])

    def run(self, mode: str, budget: int, prompts: list[list[int]], max_tokens: int) -> dict:
        job = {"mode": mode, "budget": budget, "prompts": prompts, "max_tokens": max_tokens}
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the reference process exited (code {self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def run_ddtune(  # noqa: ANN201
    engine: Any,
    scheduler: bool,
    mode: str,
    budget: int,
    prompts: list[list[int]],
    max_tokens: int,
):
    """`Engine.generate` (the single-request `Session`), or with `scheduler` the batch
    scheduler at max_batch 1 (what `ddtune serve` runs for one client)."""
    from ddtune.ddtree.batch.scheduler import BatchRequest, generate_batch
    from ddtune.params import DecodeParams, SamplingParams

    params = DecodeParams(mode, budget, 4, None).canonical()  # type: ignore[arg-type]
    sampling = SamplingParams(max_new_tokens=max_tokens, ignore_eos=True)
    outputs, taus, seconds, cpu = [], [], 0.0, 0.0
    for ids in prompts:
        start, cpu0 = time.perf_counter(), time.process_time()
        if scheduler:
            done = generate_batch(engine, [(0, BatchRequest(ids, params, sampling))], 1)
            result = done[0].result
        else:
            result = engine.generate(ids, params, sampling)
        seconds += time.perf_counter() - start
        cpu += time.process_time() - cpu0
        outputs.append(result.token_ids)
        taus += result.stats.acceptance_lengths
    return {"outputs": outputs, "seconds": seconds, "cpu": cpu, "acceptance": taus}


def main() -> int:
    import torch

    from ddtune.assets import default_drafter_dir, default_target_dir
    from ddtune.ddtree.bench.speed import default_prompts
    from ddtune.ddtree.engine import Engine

    args = parse_args()
    torch.set_num_threads(args.threads)
    checkout = args.checkout.resolve()
    if not (checkout / "ddtree.py").is_file():
        raise SystemExit(f"{checkout} is not a checkout of liranringel/ddtree (no ddtree.py)")
    version = torch.__version__.split("+")[0]
    python = ensure_venv(args.venv or checkout / ".venv-ddtune", version, args.torch_index)
    target, drafter = default_target_dir(), default_drafter_dir()
    engine = Engine.load(target, drafter)
    ours = functools.partial(run_ddtune, engine, args.scheduler)
    texts, source = default_prompts(args.prompts)
    prompts = [engine.tokenizer.encode(t) for t in texts]
    reference = Reference(python, checkout, target, drafter, args.threads)
    configs = [("ar", 0), ("dflash", 0)] + [("ddtree", b) for b in args.budgets]
    totals: dict[tuple[str, int, str], dict[str, Any]] = {}  # (mode, budget, side) -> sums
    passes: dict[tuple[str, int, int, str], dict[str, Any]] = {}  # the same, per repeat
    try:
        for side in ("reference", "ddtune"):  # warm-up, not timed
            _side_run(side, reference, ours, "ddtree", 8, prompts[:1], 8)
        for repeat in range(args.repeats):
            for mode, budget in configs:
                for i, ids in enumerate(prompts):  # the two sides alternate prompt by prompt
                    for side in SIDES if (repeat + i) % 2 == 0 else SIDES[::-1]:
                        got = _side_run(side, reference, ours, mode, budget, [ids], args.max_tokens)
                        _add(totals.setdefault((mode, budget, side), {}), got)
                        _add(passes.setdefault((mode, budget, repeat, side), {}), got)
    finally:
        reference.close()
    print(
        f"prompts: {source}; {args.max_tokens} tokens, T=0, {args.repeats} repeats, "
        f"torch threads {args.threads}, block {reference.block_size}; ddtune via "
        + ("the batch scheduler (max_batch 1)" if args.scheduler else "Engine.generate")
    )
    _print_table(configs, totals)
    _print_spread(configs, passes, args.repeats)
    return 0


def _side_run(side, reference, ours, mode, budget, prompts, max_tokens):  # noqa: ANN001, ANN202
    if side == "reference":
        return reference.run(mode, budget, prompts, max_tokens)
    return ours(mode, budget, prompts, max_tokens)


def _add(total: dict[str, Any], got: dict[str, Any]) -> None:
    total["seconds"] = total.get("seconds", 0.0) + got["seconds"]
    total["cpu"] = total.get("cpu", 0.0) + got["cpu"]
    total["tokens"] = total.get("tokens", 0) + sum(len(o) for o in got["outputs"])
    total["acceptance"] = total.get("acceptance", []) + got["acceptance"]
    total.setdefault("outputs", got["outputs"])


def _print_table(configs: list[tuple[str, int]], totals: dict) -> None:  # noqa: ANN001
    """Both engines' tok/s by wall clock and per CPU-second, their ratios, taus, equality."""
    print(
        f"{'config':<12} {'ref tok/s':>9} {'ddtune':>7} {'ratio':>6}  "
        f"{'ref tok/cpu-s':>13} {'ddtune':>7} {'ratio':>6}  {'ref tau':>7} {'ddtune':>7} "
        f"{'same output':>11}"
    )
    for mode, budget in configs:
        ref, own = totals[(mode, budget, "reference")], totals[(mode, budget, "ddtune")]
        wall = [side["tokens"] / side["seconds"] for side in (ref, own)]
        cpu = [side["tokens"] / side["cpu"] for side in (ref, own)]
        label = mode if mode != "ddtree" else f"ddtree b{budget}"
        same = "yes" if ref["outputs"] == own["outputs"] else "NO"
        print(
            f"{label:<12} {wall[0]:>9.1f} {wall[1]:>7.1f} {wall[1] / wall[0]:>6.2f}  "
            f"{cpu[0]:>13.1f} {cpu[1]:>7.1f} {cpu[1] / cpu[0]:>6.2f}  "
            f"{_tau(ref):>7.2f} {_tau(own):>7.2f} {same:>11}"
        )


def _print_spread(configs: list[tuple[str, int]], passes: dict, repeats: int) -> None:  # noqa: ANN001
    """The tok/CPU-s ratio of each repeat on its own: how far one run's figure can move."""
    if repeats < 2:
        return
    print("\nratio ddtune / reference in tok per CPU-second, repeat by repeat:")
    for mode, budget in configs:
        ratios = []
        for repeat in range(repeats):
            ref, own = (passes[(mode, budget, repeat, side)] for side in SIDES)
            ratios.append((own["tokens"] / own["cpu"]) / (ref["tokens"] / ref["cpu"]))
        label = mode if mode != "ddtree" else f"ddtree b{budget}"
        shown = " ".join(f"{r:.2f}" for r in ratios)
        print(
            f"{label:<12} median {statistics.median(ratios):.2f}  range "
            f"{min(ratios):.2f}-{max(ratios):.2f}  ({shown})"
        )


def _tau(total: dict[str, Any]) -> float:
    lengths = total["acceptance"]
    return sum(lengths) / len(lengths) if lengths else 0.0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkout", type=Path, help="a checkout of github.com/liranringel/ddtree")
    p.add_argument(
        "--venv", type=Path, help="the reference venv (default: <checkout>/.venv-ddtune)"
    )
    p.add_argument("--budgets", type=lambda s: [int(b) for b in s.split(",")], default=[8, 16, 32])
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--prompts", type=int, default=4, help="held-out prompts to use")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--scheduler",
        action="store_true",
        help="run ddtune through the batch scheduler at max_batch 1 (as `ddtune serve` does) "
        "instead of Engine.generate",
    )
    p.add_argument(
        "--torch-index",
        help="pip index for the reference venv's torch, e.g. https://download.pytorch.org/whl/cpu "
        "(default: pip's configuration)",
    )
    return p.parse_args()


if __name__ == "__main__":
    sys.exit(main())
