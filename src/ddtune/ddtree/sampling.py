"""The target's own choice of the next token: argmax at T=0, a top-k/tempered/top-p sample at T>0.

Sampling draws exactly one uniform number per emitted token and inverts the
CDF, so a seeded request consumes its random stream in token order whatever
the decoding mode: AR, DFlash and DDTree give the same sample path for the
same seed (up to float rounding at CDF boundaries).

See docs/ddtree.md "Engine".
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Sampler:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = off

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """The target's distribution after top-k, temperature and top-p: [..., V] -> [..., V]."""
        if 0 < self.top_k < logits.shape[-1]:
            kth = logits.topk(self.top_k, dim=-1).values[..., -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        p = torch.softmax(logits.double() / self.temperature, dim=-1)
        if self.top_p >= 1.0:
            return p
        sorted_p, order = p.sort(dim=-1, descending=True)
        before = sorted_p.cumsum(-1) - sorted_p  # mass strictly above each token
        sorted_p = sorted_p.masked_fill(before >= self.top_p, 0.0)  # top-1 always stays
        p = torch.zeros_like(p).scatter(-1, order, sorted_p)
        return p / p.sum(-1, keepdim=True)

    def choose(self, logits: torch.Tensor, generator: torch.Generator | None) -> int:
        """One token from logits [V]."""
        if self.greedy:
            return int(logits.argmax())
        cdf = self.probs(logits).cumsum(-1)
        u = torch.rand((), generator=generator, dtype=torch.float64) * cdf[-1]
        return int(torch.searchsorted(cdf, u.reshape(1), right=True).clamp(max=cdf.numel() - 1))
