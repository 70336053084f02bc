"""Acceptance of an EAGLE-3 head at T = 0, exactly, from the target's greedy path.

At temperature 0 the committed tokens are the target's greedy path whatever the
head drafts, and a chain draft from anchor t is accepted up to its first token
that differs from that path. Teacher-forced, `Eagle3Head.unroll` gives every
anchor's chain at once (step k fed the true token, which is the drafted one for
as long as the chain is right), so:

  1. `chain_matches`   per anchor t, how many of the head's first `steps` draft
                       tokens equal the greedy path (the chain's accepted length
                       under any K >= it)
  2. `rounds`          the rounds of a decoding with K draft tokens: from the
                       prompt's last position, accept min(matches, K), commit that
                       plus the bonus token, move the anchor on; counted as vLLM's
                       counters count them (`ddtune.engines.vllm.round_counts`: the
                       prefill gives the first token, the last round counts whole)
  3. `acceptance_by_steps`  tau (tokens per round, bonus included) and the share
                       accepted at each draft position, per K, over held-out prompts

Figures for the model card (`ddtune train eval --eagle3`). See docs/ddtree.md "Train".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ddtune.ddtree.models.eagle3 import Eagle3Head
from ddtune.ddtree.models.loading import load_decoder, load_eagle3
from ddtune.ddtree.models.model import Decoder
from ddtune.ddtree.models.tokenizer import Tokenizer
from ddtune.train.distill import batch_greedy
from ddtune.train.eagle3 import target_features
from ddtune.train.tokenizer import EOS_TOKEN, special_id


@torch.no_grad()
def chain_matches(head: Eagle3Head, target: Decoder, ids: list[int], steps: int) -> list[int]:
    """Per anchor t of the greedy sequence `ids`: the leading draft steps (at most `steps`)
    whose token is ids[t + 2 + k]; steps past the sequence's end do not count."""
    tokens = torch.tensor([ids])
    features = target_features(target, tokens, head.cfg.layer_ids(target.cfg.num_hidden_layers))
    logits = head.unroll(target.embed, tokens, features, steps)
    length = len(ids)
    hit = torch.zeros(steps, length, dtype=torch.bool)
    for k, step_logits in enumerate(logits):
        drafted = head.target_ids(step_logits[0].argmax(-1))  # [L]
        reach = max(0, length - 2 - k)
        hit[k, :reach] = drafted[:reach] == tokens[0, 2 + k :]
    leading = hit.int().cumprod(dim=0).sum(dim=0)  # leading run of hits per anchor
    return [int(x) for x in leading]


@dataclass
class Rounds:
    """What vLLM's counters add for one request: drafts, accepted, accepted per position."""

    drafts: int
    accepted: int
    per_position: list[int]


def rounds(matches: Sequence[int], prompt_len: int, max_tokens: int, k: int) -> Rounds:
    """The verify rounds of a K-token chain decoding of `max_tokens` after the prompt."""
    per_position = [0] * k
    drafts = accepted = 0
    made, anchor = 1, prompt_len - 1  # the prefill's token; its anchor is the prompt's end
    while made < max_tokens:
        a = min(matches[anchor], k)
        drafts, accepted, made, anchor = drafts + 1, accepted + a, made + a + 1, anchor + a + 1
        for i in range(a):
            per_position[i] += 1
    return Rounds(drafts, accepted, per_position)


def acceptance_by_steps(
    target_dir: Path, head_dir: Path, prompts: Sequence[str], max_tokens: int, steps: int = 5
) -> dict[str, Any]:
    """tau and per-position acceptance for K = 1..steps over `prompts` (EOS ignored, like the
    benchmark), with the greedy paths computed once."""
    target, head = load_decoder(target_dir), load_eagle3(head_dir)
    tokenizer = Tokenizer.load(target_dir)
    eos = special_id(tokenizer.inner, EOS_TOKEN)
    encoded = [tokenizer.encode(p) for p in prompts]
    total = [Rounds(0, 0, [0] * k) for k in range(1, steps + 1)]
    for prompt in encoded:
        (generated,) = batch_greedy(target, [prompt], max_tokens + steps + 1, eos, False)
        matches = chain_matches(head, target, prompt + generated, steps)
        for k, acc in enumerate(total, start=1):
            r = rounds(matches, len(prompt), max_tokens, k)
            acc.drafts, acc.accepted = acc.drafts + r.drafts, acc.accepted + r.accepted
            acc.per_position = [
                a + b for a, b in zip(acc.per_position, r.per_position, strict=True)
            ]
    return {
        f"k{k}": {
            "tau": 1 + r.accepted / max(1, r.drafts),
            "drafts": r.drafts,
            "accepted_per_position": r.per_position,
        }
        for k, r in enumerate(total, start=1)
    }
