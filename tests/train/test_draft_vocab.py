"""The draft vocabulary: the target's most generated tokens, ties to the smaller id."""

from __future__ import annotations

import pytest
import torch

from ddtune.errors import UserError
from ddtune.train.distill import Example
from ddtune.train.draft_vocab import draft_vocabulary, token_counts

EXAMPLES = [
    Example([9, 9, 9, 5, 5, 5, 7, 7, 2], prompt_len=3),  # prompt [9, 9, 9] is not counted
    Example([1, 7, 3, 3, 6], prompt_len=1),
]


def test_counts_cover_the_generated_part_only() -> None:
    counts = token_counts(EXAMPLES, vocab_size=10)
    assert counts.tolist() == [0, 0, 1, 2, 0, 3, 1, 3, 0, 0]


def test_most_generated_tokens_ascending_with_their_coverage() -> None:
    vocab = draft_vocabulary(EXAMPLES, size=3, vocab_size=10)
    # 5 and 7 (3 each), then 3 (2); 2 and 6 (1 each) are left out
    assert vocab.ids.tolist() == [3, 5, 7] and vocab.size == 3
    assert vocab.coverage == pytest.approx(8 / 10)
    tie = draft_vocabulary(EXAMPLES, size=4, vocab_size=10)
    assert tie.ids.tolist() == [2, 3, 5, 7]  # 2 and 6 tie at one: the smaller id wins


def test_a_vocabulary_as_large_as_the_targets_is_all_of_it() -> None:
    vocab = draft_vocabulary(EXAMPLES, size=10, vocab_size=10)
    assert torch.equal(vocab.ids, torch.arange(10)) and vocab.coverage == 1.0
    with pytest.raises(UserError, match="at least 2 tokens"):
        draft_vocabulary(EXAMPLES, size=1, vocab_size=10)
