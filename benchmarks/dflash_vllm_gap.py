"""DFlash acceptance, ddtune's engine next to vLLM's, on the same drafter, prompts and tokens.

    PYTHONPATH=src python benchmarks/dflash_vllm_gap.py [--k 7] [--max-tokens 48]
        [--vllm http://127.0.0.1:PORT --model NAME [--steps]]

ddtune side (always, in-process, bundled target + drafter, T=0, EOS ignored):
for each convention of the last target layer's feature — `post-norm` (ddtune,
Hugging Face `hidden_states[-1]`, what the bundled drafter was trained on) and
`pre-norm` (vLLM: the residual stream before the final norm) — it decodes each
prompt with a drafter block of K + 1 queries (the bonus + K masks, as vLLM
builds it for `num_speculative_tokens = K`) and prints, per prompt and over
all prompts:

- `rounds`      verify rounds until `max_tokens` tokens exist (like vLLM, the
                last round is not cut short: vLLM drafts K tokens every round)
- `vllm-count`  1 + accepted / drafts over those rounds (vLLM's counters)
- `engine`      `GenerationStats.mean_acceptance_length` of a run capped at
                `max_tokens` (its last round drafts only what still fits)
- `tok/round`   generated tokens / rounds of that capped run (the prefill's
                token included: what tests/integration/test_vllm_dflash.py printed)
- `per-pos`     rounds that accepted at least 1, 2, ... draft tokens (vLLM's
                `spec_decode_num_accepted_tokens_per_pos`)

vLLM side (with `--vllm`): the same prompt token ids to a running vLLM server
started with `--speculative-config '{"method":"dflash", ...}'`, one request at a
time, its counters read before and after each (`/metrics`): accepted, drafts,
per-position, 1 + accepted/drafts; and whether its greedy tokens equal ddtune's.
With `--steps` it also streams each prompt (vLLM sends one chunk per engine
step: the tokens of one verify round), prints vLLM's rounds next to ddtune's
with vLLM's capture, and where they first part, the round, the depth and the
drafter's top-1 minus top-2 logit there (a small gap: a near-tie that float
differences between the two implementations can flip), and how far the
target's own log-probabilities of the chosen tokens are apart (vLLM
`logprobs: 1` vs ddtune's AR `logprobs`).
See docs/engines.md "vLLM DFlash" (the acceptance gap).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import httpx
import torch
from prometheus_client.parser import text_string_to_metric_families

from ddtune.assets import default_drafter_dir, default_target_dir
from ddtune.ddtree.engine import Engine
from ddtune.ddtree.models.capture import residual_capture
from ddtune.engines.vllm import VLLM_ACCEPTED, VLLM_DRAFTS, round_counts
from ddtune.params import DecodeParams, SamplingParams

PROMPTS = [  # tests/integration/test_vllm_dflash.py's three prompts
    'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    "def is_prime(n):\n    if n < 2:\n        return False\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n",
]
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"


@dataclasses.dataclass
class Counts:
    """One decoding's rounds as vLLM's counters see them."""

    accepted: int = 0
    drafts: int = 0
    per_pos: list[int] = dataclasses.field(default_factory=list)

    def add(self, other: Counts) -> None:
        self.accepted += other.accepted
        self.drafts += other.drafts
        width = max(len(self.per_pos), len(other.per_pos))
        mine = self.per_pos + [0] * (width - len(self.per_pos))
        theirs = other.per_pos + [0] * (width - len(other.per_pos))
        self.per_pos = [a + b for a, b in zip(mine, theirs, strict=True)]

    @property
    def tau(self) -> float:
        return 1 + self.accepted / self.drafts if self.drafts else float("nan")

    def row(self) -> str:
        return (
            f"rounds {self.drafts:3d}  accepted {self.accepted:4d}  vllm-count {self.tau:.3f}  "
            f"per-pos {self.per_pos}"
        )


def counts_of(lengths: list[int], max_tokens: int, k: int) -> Counts:
    """vLLM's counters for one request whose (uncut) rounds commit `lengths` tokens each."""
    accepted, drafts = round_counts(lengths, max_tokens)
    per_pos = [sum(n - 1 > i for n in lengths[:drafts]) for i in range(k)]
    return Counts(accepted, drafts, per_pos)


@contextlib.contextmanager
def drafter_block(engine: Engine, k: int) -> Iterator[None]:
    """The drafter's block as vLLM builds it for K: the bonus + K mask queries."""
    assert engine.drafter is not None
    cfg = engine.drafter.cfg
    engine.drafter.cfg = dataclasses.replace(cfg, block_size=k + 1)
    try:
        yield
    finally:
        engine.drafter.cfg = cfg


def ddtune_side(
    engine: Engine, prompts: list[list[int]], k: int, max_tokens: int
) -> list[list[int]]:
    """Token ids per prompt; prints the counters' conventions side by side."""
    total, outputs = Counts(), []
    with drafter_block(engine, k):
        for ids in prompts:
            # uncut: vLLM drafts K tokens every round, the last one included
            free = engine.generate(
                ids, DecodeParams("dflash"), SamplingParams(max_tokens + k + 1, ignore_eos=True)
            )
            cut = engine.generate(
                ids, DecodeParams("dflash"), SamplingParams(max_tokens, ignore_eos=True)
            )
            outputs.append(list(cut.token_ids))
            counts = counts_of(free.stats.acceptance_lengths, max_tokens, k)
            total.add(counts)
            per_round = len(cut.token_ids) / cut.stats.rounds  # the capped run's own figures
            print(
                f"    {counts.row()}  engine {cut.stats.mean_acceptance_length:.3f}  "
                f"tok/round {per_round:.3f}  (rounds capped {cut.stats.rounds})"
            )
    print(f"  all {total.row()}")
    return outputs


def scrape(client: httpx.Client, url: str) -> Counts:
    """vLLM's cumulative spec-decode counters (per-position by its `position` label)."""
    counts, per_pos = Counts(), dict[int, int]()
    for family in text_string_to_metric_families(client.get(url + "/metrics").text):
        for sample in family.samples:
            if sample.name == f"{VLLM_ACCEPTED}_total":
                counts.accepted += int(sample.value)
            elif sample.name == f"{VLLM_DRAFTS}_total":
                counts.drafts += int(sample.value)
            elif sample.name == f"{PER_POS}_total":
                pos = int(sample.labels["position"])
                per_pos[pos] = per_pos.get(pos, 0) + int(sample.value)
    counts.per_pos = [per_pos[i] for i in sorted(per_pos)]
    return counts


def vllm_side(url: str, model: str, prompts: list[list[int]], max_tokens: int) -> list[Any]:
    """Per prompt: (token ids, counter differences) from a running vLLM."""
    results = []
    with httpx.Client(timeout=900) as client:
        for ids in prompts:
            before = scrape(client, url)
            body = {
                "model": model,
                "prompt": ids,
                "max_tokens": max_tokens,
                "temperature": 0,
                "ignore_eos": True,
                "return_token_ids": True,
            }
            reply = client.post(url + "/v1/completions", json=body).raise_for_status().json()
            after = scrape(client, url)
            diff = Counts(
                after.accepted - before.accepted,
                after.drafts - before.drafts,
                [a - b for a, b in zip(after.per_pos, before.per_pos, strict=True)],
            )
            results.append((reply["choices"][0]["token_ids"], diff))
    return results


def vllm_steps(url: str, model: str, ids: list[int], max_tokens: int) -> list[int]:
    """Tokens per engine step of one streamed request (the prefill's token first)."""
    body = {"model": model, "prompt": ids, "max_tokens": max_tokens, "temperature": 0}
    body |= {"ignore_eos": True, "stream": True, "return_token_ids": True}
    sizes = []
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=900) as reply:
        for line in reply.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                choices = json.loads(line[len("data: ") :])["choices"]
                if choices and choices[0].get("token_ids"):
                    sizes.append(len(choices[0]["token_ids"]))
    return sizes


def draft_gaps(engine: Engine, ids: list[int], k: int, max_tokens: int) -> tuple[list, list]:
    """ddtune's rounds with vLLM's capture (the prefill's token first) and, per round, the
    drafter's top-1 minus top-2 logit at each depth."""
    head, gaps = engine.target.lm_logits, []

    def recording(hidden: torch.Tensor) -> torch.Tensor:
        logits = head(hidden)
        if logits.dim() == 2 and logits.shape[0] == k:  # the drafter's K depths
            top = logits.float().topk(2, dim=-1).values
            gaps.append((top[:, 0] - top[:, 1]).tolist())
        return logits

    engine.target.lm_logits = recording
    try:
        with drafter_block(engine, k), residual_capture(engine.target):
            result = engine.generate(
                ids, DecodeParams("dflash"), SamplingParams(max_tokens, ignore_eos=True)
            )
    finally:
        del engine.target.lm_logits  # back to the class's method
    return [1, *result.stats.acceptance_lengths], gaps


def target_logprob_gap(engine: Engine, url: str, model: str, ids: list[int], n: int) -> float:
    """Largest |vLLM - ddtune| log-probability of the same greedy tokens under the target."""
    body = {"model": model, "prompt": ids, "max_tokens": n, "temperature": 0}
    body |= {"ignore_eos": True, "logprobs": 1}
    reply = httpx.post(url + "/v1/completions", json=body, timeout=900).raise_for_status().json()
    theirs = reply["choices"][0]["logprobs"]["token_logprobs"]
    result = engine.generate(
        ids, DecodeParams("ar"), SamplingParams(n, ignore_eos=True, logprobs=1)
    )
    assert result.logprobs is not None
    return max(abs(a - b.logprob) for a, b in zip(theirs, result.logprobs, strict=True))


def compare_steps(engine: Engine, url: str, model: str, prompts: list, k: int, n: int) -> None:
    """vLLM's rounds next to ddtune's (vLLM's capture), and the drafter's gap where they part."""
    for index, ids in enumerate(prompts):
        theirs = vllm_steps(url, model, ids, n)
        ours, gaps = draft_gaps(engine, ids, k, n)
        print(f"  prompt {index}: vLLM   {theirs}\n            ddtune {ours}")
        parted = next(
            (r for r, (a, b) in enumerate(zip(theirs, ours, strict=False)) if a != b), None
        )
        if parted is not None:
            depth = min(theirs[parted], ours[parted])  # the first depth one of them rejected
            gap = gaps[parted - 1][depth - 1]
            print(f"            part at round {parted}, depth {depth}: drafter gap {gap:.3f}")
        logprob_gap = target_logprob_gap(engine, url, model, ids, n)
        print(f"            target logprobs of the tokens: max |vLLM - ddtune| {logprob_gap:.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--k", type=int, default=None, help="num_speculative_tokens (block - 1)")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--vllm", default=None, help="base URL of a running vLLM dflash server")
    parser.add_argument("--model", default="t", help="its served model name")
    parser.add_argument("--steps", action="store_true", help="with --vllm: rounds side by side")
    args = parser.parse_args()
    torch.set_num_threads(1)
    engine = Engine.load(default_target_dir(), default_drafter_dir())
    assert engine.drafter is not None
    k = args.k or engine.drafter.cfg.block_size - 1
    prompts = [engine.tokenizer.encode(p) for p in PROMPTS]
    print(f"K = {k}, {len(prompts)} prompts x {args.max_tokens} tokens, T=0")
    print("ddtune, last-layer feature post-norm (ddtune / Hugging Face; the drafter's training):")
    ours = ddtune_side(engine, prompts, k, args.max_tokens)
    print("ddtune, last-layer feature pre-norm (vLLM's capture):")
    with residual_capture(engine.target):
        theirs = ddtune_side(engine, prompts, k, args.max_tokens)
    print(f"  same tokens as post-norm: {sum(a == b for a, b in zip(ours, theirs, strict=True))}/3")
    if args.vllm:
        print(f"vLLM at {args.vllm}:")
        total = Counts()
        for (tokens, counts), mine in zip(
            vllm_side(args.vllm, args.model, prompts, args.max_tokens), ours, strict=True
        ):
            total.add(counts)
            print(f"    {counts.row()}  same tokens as ddtune: {tokens == mine}")
        print(f"  all {total.row()}")
        if args.steps:
            print("rounds (tokens each), vLLM vs ddtune with vLLM's capture:")
            compare_steps(engine, args.vllm, args.model, prompts, k, args.max_tokens)


if __name__ == "__main__":
    main()
