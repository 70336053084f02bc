"""Task loading, code extraction, pass@k, and canonical solutions passing in the sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddtune.assets import TASKS_FILE
from ddtune.bench.coding import (
    CodingTask,
    build_program,
    build_test,
    evaluate,
    extract_code,
    pass_at_k,
    pass_at_k_summary,
    read_tasks,
)
from ddtune.bench.sandbox.checker import SandboxLimits
from ddtune.errors import UserError

PROMPT = 'def inc(x: int) -> int:\n    """Add one."""\n'
LIMITS = SandboxLimits(timeout_s=5)


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("    return x + 1\n\n\ndef other():\n    pass\n", "    return x + 1\n\n"),
        ("    return x + 1\nif __name__ == '__main__':\n    print(inc(1))\n", "    return x + 1"),
        ("    return x + 1\nprint(inc(2))\n", "    return x + 1"),
        ("    y = x\n    return y + 1\n```\nSome prose", "    y = x\n    return y + 1"),
        (
            "  y = x\n  return y + 1\n",
            "    y = x\n    return y + 1",
        ),  # re-indented to the prompt's 4
        ("```python\ndef inc(x):\n    return x + 1\n```\nmore", "def inc(x):\n    return x + 1"),
        ("Here it is:\n```python\n    return x + 1\n```\n", "    return x + 1"),
        (
            "def inc(x):\n    return x + 1\n\nclass Z:\n    pass\n",
            "def inc(x):\n    return x + 1\n",
        ),
    ],
)
def test_extract_code(completion: str, expected: str) -> None:
    assert extract_code(PROMPT, completion) == expected


@pytest.mark.parametrize(
    "completion",
    [
        "    return x + 1\n\n\ndef other():\n    pass\n",
        "  return x + 1\n",
        "```python\ndef inc(x):\n    return x + 1\n```\n",
        "def inc(x):\n    return x + 1\n",
    ],
)
def test_extracted_code_runs(completion: str) -> None:
    task = _task("def check(candidate):\n    assert candidate(1) == 2\n")
    assert evaluate(task, completion, LIMITS).outcome == "passed"


def test_wrong_completion_fails_with_reason() -> None:
    task = _task("def check(candidate):\n    assert candidate(1) == 2\n")
    assert evaluate(task, "    return x\n", LIMITS).outcome == "assertion"
    assert evaluate(task, "    return x +\n", LIMITS).outcome == "syntax_error"


def test_pass_at_k_unbiased_estimator() -> None:
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 3, 3) == 1.0  # fewer than k failures: every k-subset has a pass
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)
    with pytest.raises(ValueError):
        pass_at_k(2, 3, 1)
    summary = pass_at_k_summary([[True, False], [False, False]])
    assert summary == {"pass_at_1": pytest.approx(0.25), "pass_at_2": pytest.approx(0.5)}


def test_load_tasks_limit_and_errors(tmp_path: Path, fixtures_dir: Path) -> None:
    assert len(read_tasks(fixtures_dir / "tasks.jsonl")) == 4
    assert [t.task_id for t in read_tasks(fixtures_dir / "tasks.jsonl", limit=2)] == [
        "fx/0",
        "fx/1",
    ]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"task_id": "a", "prompt": "p", "entry_point": "f"}) + "\n")
    with pytest.raises(UserError, match=r"bad.jsonl:1: field 'test'"):
        read_tasks(bad)
    bad.write_text("{not json\n")
    with pytest.raises(UserError, match="bad.jsonl:1: not valid JSON"):
        read_tasks(bad)
    with pytest.raises(UserError, match="does not exist"):
        read_tasks(tmp_path / "missing.jsonl")


def test_canonical_solutions_of_fixture_tasks_pass(fixtures_dir: Path) -> None:
    tasks = read_tasks(fixtures_dir / "tasks.jsonl")
    outcomes = [evaluate(t, t.canonical_solution, LIMITS).outcome for t in tasks]
    assert outcomes == ["passed"] * len(tasks)


@pytest.mark.skipif(not TASKS_FILE.is_file(), reason="bundled held-out tasks not generated yet")
def test_canonical_solutions_of_bundled_tasks_all_pass() -> None:
    tasks = read_tasks(TASKS_FILE)
    assert all(t.canonical_solution for t in tasks)
    failed = [
        (t.task_id, r.outcome, r.detail)
        for t in tasks
        if not (r := evaluate(t, t.canonical_solution, LIMITS)).passed
    ]
    assert failed == []
    assert len(tasks) >= 10


def test_build_program_replaces_rewritten_function() -> None:
    task = _task("def check(candidate):\n    assert candidate(1) == 2\n")
    text = build_program(task, "def inc(x):\n    return x + 1")
    assert text.startswith(PROMPT) and "def inc(x):\n    return x + 1" in text


def test_build_test_keeps_the_prompt_helpers_without_the_body() -> None:
    prompt = 'import math\n\ndef helper(x):\n    return x * 2\n\ndef inc(x: int) -> int:\n    """Add one."""\n'
    task = CodingTask(
        "t/1", prompt, "inc", "def check(candidate):\n    assert helper(candidate(1)) == 4\n"
    )
    namespace: dict = {}
    exec(compile(build_test(task), "test.py", "exec"), namespace)
    assert namespace["inc"](1) is None and namespace["helper"](2) == 4  # the stub, the real helper
    assert "check" in namespace and "math" in namespace
    assert evaluate(task, "    return x + 1\n", LIMITS).outcome == "passed"


def _task(test: str):
    from ddtune.bench.coding import CodingTask

    return CodingTask("t/0", PROMPT, "inc", test)
