"""`SuiteItem`: one question, problem or session of a suite, and the seeded subset a bench sends.

An item is a completion (`prompt`) or a chat (`messages`, sent to the server's
`/v1/chat/completions`; `follow_ups`: later user turns, each sent with the
server's own answers). It carries what scores it: a HumanEval `task` (tests run
in the sandbox) or GSM8K's `expected` answer; MT-Bench and agent sessions are
unscored (their figures are speed and acceptance).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from ddtune.bench.client import Message
from ddtune.bench.coding import CodingTask

T = TypeVar("T")


@dataclass(frozen=True)
class SuiteItem:
    suite: str
    item_id: str
    prompt: str = ""
    messages: tuple[Message, ...] = ()
    follow_ups: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    task: CodingTask | None = None  # humaneval: scored by its tests, in the sandbox
    expected: str | None = None  # gsm8k: the numeric answer


def seeded_subset(items: Sequence[T], limit: int | None, seed: int, salt: str) -> list[T]:
    """`limit` items drawn by (seed, salt), kept in their own order; all when None.

    The salt (the suite's name) keeps two suites' draws independent; the same seed
    draws the same subset on every machine and for every config."""
    if limit is None or limit >= len(items):
        return list(items)
    chosen = set(random.Random(f"{seed}:{salt}").sample(range(len(items)), limit))
    return [item for i, item in enumerate(items) if i in chosen]
