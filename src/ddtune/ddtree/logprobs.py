"""Log-probabilities of tokens under the target: the token's own and the N most likely.

Raw values: `log_softmax` of the target's logits, before temperature, top-p,
top-k or `min_tokens` change the distribution (what vLLM reports by default).
They are taken from the logits that chose each token (prefill, AR step or the
DDTree walk) and from a full-logits prefill for prompt tokens, so at T=0 every
decoding mode reports the same values for the same tokens, up to float
rounding. See docs/ddtree.md "Engine".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TokenLogprob:
    token: int
    logprob: float
    top: tuple[tuple[int, float], ...]  # the N most likely (token, logprob), best first


def logprobs_of(logits: torch.Tensor, tokens: Sequence[int], n: int) -> list[TokenLogprob]:
    """One `TokenLogprob` per row of `logits` [T, V] for `tokens[t]`, with the top `n`."""
    if not tokens:
        return []
    lp = torch.log_softmax(logits.double(), dim=-1)
    chosen = lp.gather(-1, torch.tensor(list(tokens))[:, None])[:, 0].tolist()
    n = min(n, lp.shape[-1])
    values, ids = lp.topk(n, dim=-1) if n else (lp[:, :0], lp[:, :0].long())
    return [
        TokenLogprob(int(token), float(value), tuple(zip(row_ids, row_values, strict=True)))
        for token, value, row_ids, row_values in zip(
            tokens, chosen, ids.tolist(), values.tolist(), strict=True
        )
    ]
