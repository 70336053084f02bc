"""Figures for the model card: pass@1 on held-out tasks, stdlib perplexity, acceptance lengths.

- `pass_at_1`: greedy (T=0) completions from the target, cut at the end of the
  function body, executed with the task's `check(candidate)` in a separate
  Python process with a timeout.
- `heldout_perplexity`: exp(mean next-token loss) over the held-out slice of
  the standard library, in windows of the model's context.
- `acceptance_lengths`: mean tokens per verify round of the engine's `dflash`
  and `ddtree` modes on held-out task prompts, through `Engine.generate` with
  `DecodeParams` / `SamplingParams` like any other caller.
- an EAGLE-3 head's τ at K = 1..5 on the same prompts (`eagle3_eval`: exact at
  T = 0 from the greedy path; ddtune's engine does not serve EAGLE-3).

See docs/ddtree.md "Train".
"""

from __future__ import annotations

import math
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ddtune.ddtree.models.loading import load_decoder
from ddtune.ddtree.models.model import Decoder
from ddtune.ddtree.models.tokenizer import Tokenizer
from ddtune.params import DecodeParams, SamplingParams
from ddtune.train.corpus import read_text, stdlib_files
from ddtune.train.tasks import read_jsonl
from ddtune.train.tokenizer import EOS_TOKEN, special_id

STOP_STRINGS = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#", "\nassert ")


def truncate_completion(text: str) -> str:
    """The function body only: cut at EOS, a stop string or the first unindented line."""
    text = text.split(EOS_TOKEN)[0]
    for stop in STOP_STRINGS:
        text = text.split(stop)[0]
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if i > 0 and line and not line[0].isspace():
            lines = lines[:i]
            break
    text = "\n".join(lines)
    return text if text.endswith("\n") or not text else text + "\n"


def run_tests(task: dict, completion: str, timeout: float = 10.0) -> tuple[bool, str]:
    """Execute prompt + completion + the task's tests in a fresh interpreter; (passed, reason)."""
    program = (
        task["prompt"] + completion + "\n" + task["test"] + f"\ncheck({task['entry_point']})\n"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(program)
    try:
        proc = subprocess.run(
            [sys.executable, "-I", f.name], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return False, "timeout"
    finally:
        Path(f.name).unlink(missing_ok=True)
    if proc.returncode == 0:
        return True, ""
    last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
    return False, last[:200]


@torch.no_grad()
def greedy_generate(model: Decoder, prompt_ids: list[int], max_new: int, eos_id: int) -> list[int]:
    """Plain T=0 decoding with a KV cache; stops at EOS (not included) or `max_new` tokens."""
    limit = model.cfg.max_position_embeddings
    cache = model.new_cache(min(limit, len(prompt_ids) + max_new))
    ids = torch.tensor([prompt_ids])  # [1, P]
    out: list[int] = []
    for _ in range(min(max_new, limit - len(prompt_ids))):
        logits = model(ids, cache=cache, last_logits_only=True).logits  # [1, 1, V]
        token = int(logits[0, -1].argmax())
        if token == eos_id:
            break
        out.append(token)
        ids = torch.tensor([[token]])
    return out


def pass_at_1(model: Decoder, tokenizer: Tokenizer, tasks: list[dict], max_new: int = 160) -> dict:
    """Greedy pass@1 with per-task outcomes."""
    eos = special_id(tokenizer.inner, EOS_TOKEN)
    results = []
    for task in tasks:
        ids = greedy_generate(model, tokenizer.encode(task["prompt"]), max_new, eos)
        completion = truncate_completion(tokenizer.decode(ids))
        passed, reason = run_tests(task, completion)
        results.append({"task_id": task["task_id"], "passed": passed, "reason": reason})
    count = sum(1 for r in results if r["passed"])
    return {
        "passed": count,
        "total": len(results),
        "pass_at_1": count / max(1, len(results)),
        "results": results,
    }


@torch.no_grad()
def heldout_perplexity(model: Decoder, tokenizer: Tokenizer, max_tokens: int = 60_000) -> dict:
    """exp(mean NLL) over windows of the held-out stdlib files (EOS between files)."""
    eos = special_id(tokenizer.inner, EOS_TOKEN)
    ids: list[int] = []
    for path in stdlib_files("heldout"):
        ids += tokenizer.encode(read_text(path)) + [eos]
        if len(ids) > max_tokens:
            break
    ids = ids[:max_tokens]
    window = model.cfg.max_position_embeddings
    total_nll, count = 0.0, 0
    for start in range(0, len(ids) - 1, window):
        chunk = torch.tensor([ids[start : start + window + 1]])  # [1, <=W+1]
        if chunk.shape[1] < 2:
            break
        logits = model(chunk[:, :-1]).logits  # [1, T, V]
        nll = F.cross_entropy(logits[0], chunk[0, 1:], reduction="sum")
        total_nll, count = total_nll + nll.item(), count + chunk.shape[1] - 1
    return {"perplexity": math.exp(total_nll / count), "tokens": count}


def acceptance_lengths(
    target_dir: Path,
    drafter_dir: Path,
    prompts: list[str],
    budgets: list[int],
    max_tokens: int,
    topk: int = 4,
) -> dict[str, Any]:
    """Mean acceptance length (tokens per verify round, bonus included) and tok/s per mode, T=0."""
    from ddtune.ddtree import Engine

    engine = Engine.load(target_dir, drafter_dir)
    sampling = SamplingParams(max_new_tokens=max_tokens)
    runs = [DecodeParams("ar").canonical(), DecodeParams("dflash").canonical()]
    runs += [DecodeParams("ddtree", budget, topk) for budget in budgets]
    figures: dict[str, Any] = {}
    for params in runs:
        results = [engine.generate(engine.tokenizer.encode(p), params, sampling) for p in prompts]
        stats = [r.stats for r in results]
        rounds = sum(s.rounds for s in stats)
        seconds = sum(s.total_seconds for s in stats)
        label = params.mode if params.mode != "ddtree" else f"ddtree_b{params.budget}"
        figures[label] = {
            "mean_acceptance_length": sum(sum(s.acceptance_lengths) for s in stats)
            / max(1, rounds),
            "tokens_per_second": sum(s.generated_tokens for s in stats) / max(1e-9, seconds),
        }
    return figures


def evaluate_models(
    target_dir: Path,
    drafter_dir: Path | None,
    tasks_file: Path | None,
    budgets: list[int],
    n_prompts: int,
    max_tokens: int,
    target_figures: bool = True,
    eagle3_dir: Path | None = None,
) -> dict[str, Any]:
    """All figures of the model card as one JSON-able dict (pass@1/perplexity optional)."""
    from ddtune.assets import default_tasks_file

    tasks = read_jsonl(tasks_file or default_tasks_file())
    figures: dict[str, Any] = {}
    if eagle3_dir is not None:
        from ddtune.train.eagle3_eval import acceptance_by_steps

        prompts = [t["prompt"] for t in tasks[:n_prompts]]
        figures["eagle3"] = acceptance_by_steps(target_dir, eagle3_dir, prompts, max_tokens)
    if target_figures:
        model, tokenizer = load_decoder(target_dir), Tokenizer.load(target_dir)
        figures["coding"] = pass_at_1(model, tokenizer, tasks)
        figures["stdlib"] = heldout_perplexity(model, tokenizer)
    if drafter_dir is not None:
        prompts = [t["prompt"] for t in tasks[:n_prompts]]
        figures["acceptance"] = acceptance_lengths(
            target_dir, drafter_dir, prompts, budgets, max_tokens
        )
        ar = figures["acceptance"]["ar"]["tokens_per_second"]
        best = max(
            (v["tokens_per_second"], k)
            for k, v in figures["acceptance"].items()
            if k.startswith("ddtree")
        )
        figures["ddtree_best_over_ar"] = {"budget": best[1], "speedup": best[0] / ar}
    return figures
