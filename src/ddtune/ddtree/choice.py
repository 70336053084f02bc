"""One request's choice of each output token, shared by `Session` and batched decoding.

`TokenChooser.choose(logits)` applies, in order: the `min_tokens` ban (the
stop ids cannot be chosen while fewer than `min_tokens` tokens were chosen),
the `Sampler` (argmax at T=0, else one uniform draw from the request's own
generator), and records the token's raw logprob + top N when asked
(`logprobs.py`). `plain_argmax` says when the choice is just the argmax of
the raw logits with nothing to record, so a batch may take argmaxes for
many rows at once and report them with `took(token)`. See
docs/ddtree.md "Engine".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ddtune.ddtree.logprobs import TokenLogprob, logprobs_of
from ddtune.ddtree.sampling import Sampler


@dataclass
class TokenChooser:
    sampler: Sampler
    generator: torch.Generator | None
    min_tokens: int = 0  # `stop_ids` cannot be chosen before this many tokens
    stop_ids: tuple[int, ...] = ()
    logprobs: int | None = None  # record each chosen token's logprob + the top N
    chosen: int = 0  # tokens chosen so far (the output index of the next one)
    token_logprobs: list[TokenLogprob] = field(default_factory=list)

    @property
    def banning(self) -> bool:
        return self.chosen < self.min_tokens and bool(self.stop_ids)

    @property
    def plain_argmax(self) -> bool:
        """The next choice is the argmax of the raw logits, with nothing to record."""
        return self.sampler.greedy and self.logprobs is None and not self.banning

    def choose(self, logits: torch.Tensor) -> int:
        """The next output token from the target's logits [V]."""
        scores = logits
        if self.banning:  # too early to stop
            scores = logits.index_fill(-1, torch.tensor(self.stop_ids), float("-inf"))
        token = self.sampler.choose(scores, self.generator)
        self.chosen += 1
        if self.logprobs is not None:
            self.token_logprobs += logprobs_of(logits[None], [token], self.logprobs)
        return token

    def took(self, token: int) -> int:
        """Count a choice made outside (`plain_argmax` was true); returns the token."""
        self.chosen += 1
        return token
