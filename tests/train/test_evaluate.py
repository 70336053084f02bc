"""The evaluator: completions are cut at the end of the body, tests really execute, and
acceptance lengths come from the engine."""

from __future__ import annotations

import itertools
import json

from ddtune.ddtree.testing import write_random_checkpoint
from ddtune.train.evaluate import acceptance_lengths, run_tests, truncate_completion
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


def test_acceptance_lengths_per_mode(tmp_path) -> None:
    target, drafter = write_random_checkpoint(tmp_path, seed=2, block_size=4)
    figures = acceptance_lengths(target, drafter, ["def f(x):", "x = 1"], [2, 8], max_tokens=10)
    assert list(figures) == ["ar", "dflash", "ddtree_b2", "ddtree_b8"]
    assert figures["ar"]["mean_acceptance_length"] == 1.0
    assert all(1.0 <= f["mean_acceptance_length"] <= 4.0 for f in figures.values())
    assert all(f["tokens_per_second"] > 0 for f in figures.values())
