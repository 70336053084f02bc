"""Scoring a suite's answers: HumanEval's tests in ddtune's sandbox, GSM8K's numbers.

Fills `passed`, `fail_reason` (and for HumanEval `fail_detail`, `test_s`) of
the first-turn samples whose item is scored; the rest keep None (unscored).
Model-written code only ever runs in the sandbox (`ddtune.bench.coding.evaluate`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ddtune.bench.coding import evaluate
from ddtune.bench.sandbox.checker import SandboxLimits
from ddtune.bench.suites.gsm8k import answer_matches
from ddtune.bench.suites.plan import Workloads


def score_samples(
    samples: list[dict[str, Any]],
    workloads: Workloads,
    limits: SandboxLimits,
    advance: Callable[[], None] | None = None,
) -> None:
    for sample in samples:
        item = workloads.item(sample["workload"], sample["index"])
        if item is None or sample.get("turn", 1) != 1:
            continue
        sample["item_id"] = item.item_id
        if item.task is not None:
            outcome = evaluate(item.task, sample["text"], limits)
            sample.update(
                passed=outcome.passed,
                fail_reason=None if outcome.passed else outcome.outcome,
                fail_detail=outcome.detail,
                test_s=round(outcome.duration_s, 4),
            )
            if advance is not None:
                advance()
        elif item.expected is not None:
            right = answer_matches(sample["text"], item.expected)
            sample.update(passed=right, fail_reason=None if right else "wrong_answer")


def tested(workloads: Workloads) -> int:
    """How many samples `score_samples` runs tests for (for a progress bar)."""
    return sum(1 for items in workloads.items.values() for item in items if item.task is not None)
