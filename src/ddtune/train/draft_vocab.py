"""The draft vocabulary of an EAGLE-3 head: the tokens the target writes most often.

A head scores `size` of the target's tokens instead of all of them (released
EAGLE-3 heads for Llama 3 score 32 000 of 128 256): a smaller LM head, drafting
that never proposes a rare token. The tokens are counted in what the target
itself generates (the distillation data, prompts excluded); ties go to the
smaller id. `coverage` is the share of generated tokens the vocabulary holds:
the ceiling of the head's first-step accuracy on that data.

    vocab = draft_vocabulary(examples, size=2048, vocab_size=4096)
    head.set_vocabulary(vocab.ids)        # d2t and t2d, as vLLM and SGLang read them

See docs/ddtree.md "Train".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ddtune.errors import UserError
from ddtune.train.distill import Example


@dataclass(frozen=True)
class DraftVocab:
    ids: torch.Tensor  # int64 [size], ascending target ids
    coverage: float  # share of the counted tokens that are in `ids`

    @property
    def size(self) -> int:
        return int(self.ids.shape[0])


def token_counts(examples: Sequence[Example], vocab_size: int) -> torch.Tensor:
    """int64 [vocab_size]: how often the target generated each token (prompts left out)."""
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for example in examples:
        generated = torch.tensor(example.ids[example.prompt_len :], dtype=torch.long)
        counts += torch.bincount(generated, minlength=vocab_size)
    return counts


def draft_vocabulary(examples: Sequence[Example], size: int, vocab_size: int) -> DraftVocab:
    """The `size` most generated tokens (all of them when `size` >= `vocab_size`)."""
    if size < 2:
        raise UserError(f"the draft vocabulary needs at least 2 tokens; got {size}")
    counts = token_counts(examples, vocab_size)
    total = int(counts.sum())
    if size >= vocab_size:
        return DraftVocab(torch.arange(vocab_size), 1.0)
    # stable sort on -count: equal counts keep ascending ids
    order = torch.sort(-counts, stable=True).indices[:size]
    ids = torch.sort(order).values
    return DraftVocab(ids, float(counts[ids].sum()) / max(1, total))
