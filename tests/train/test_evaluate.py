"""The evaluator: completions are cut at the end of the body and tests really execute."""

from __future__ import annotations

import itertools
import json

from ddtune.train.evaluate import run_tests, truncate_completion
from ddtune.train.tasks import iter_tasks


def _task() -> dict:
    return json.loads(next(itertools.islice(iter_tasks(0, "train"), 1)).to_json())


def test_truncation_keeps_the_body_only() -> None:
    body = "    x = x + 1\n    return x\n"
    assert truncate_completion(body + "<|endoftext|>def other():\n") == body
    assert truncate_completion(body + "\ndef g(x):\n    pass\n") == body
    assert truncate_completion(body + "print(x)\n") == body
    assert truncate_completion(body) == body


def test_canonical_passes_and_wrong_or_hanging_bodies_fail() -> None:
    task = _task()
    assert run_tests(task, task["canonical_solution"]) == (True, "")
    passed, reason = run_tests(task, "    return None\n")
    assert not passed and "AssertionError" in reason
    passed, reason = run_tests(task, "    while True:\n        pass\n", timeout=2.0)
    assert (passed, reason) == (False, "timeout")
    passed, reason = run_tests(task, "    return (\n")
    assert not passed and "SyntaxError" in reason
