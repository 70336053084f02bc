"""Coding correctness: HumanEval-format tasks, code extraction, sandboxed checks, pass@k.

A task file is JSONL with `task_id, prompt, entry_point, test` per line
(`canonical_solution` optional). A completion continues the prompt (the
function body); `extract_code` keeps the part that belongs to the function and
`evaluate` runs it in the sandbox: prompt + code (`build_program`, untrusted)
in the tested process, prompt + test (`build_test`, trusted) in the checker,
which calls `check(entry_point)` (docs/bench.md "Sandbox").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import comb
from pathlib import Path
from typing import Any

from ddtune.bench.sandbox.checker import ExecResult, SandboxLimits, run_program
from ddtune.errors import UserError
from ddtune.jsonl import jsonl_rows

REQUIRED_FIELDS = ("task_id", "prompt", "entry_point", "test")
STOP_SEQUENCES = ["\ndef ", "\nclass ", "\nif __name__", "\n```"]  # OpenAI allows at most 4
FENCE = re.compile(r"```[a-zA-Z0-9_+-]*\n(.*?)(?:```|\Z)", re.S)


@dataclass(frozen=True)
class CodingTask:
    task_id: str
    prompt: str
    entry_point: str
    test: str
    canonical_solution: str | None = None


def read_tasks(path: str | Path, limit: int | None = None) -> list[CodingTask]:
    """Read a HumanEval-format JSONL (`.gz` too); a clear error names the bad line and field."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"coding tasks file {path} does not exist; pass a HumanEval-format JSONL")
    tasks = []
    for number, row in jsonl_rows(path):
        tasks.append(task_from_row(row, f"{path}:{number}"))
        if limit is not None and len(tasks) >= limit:
            break
    if not tasks:
        raise UserError(f"coding tasks file {path} has no tasks")
    return tasks


def task_from_row(row: Any, where: str) -> CodingTask:
    """One HumanEval row (`task_id, prompt, entry_point, test`) as a `CodingTask`."""
    if not isinstance(row, dict):
        raise UserError(f"{where}: expected a JSON object per line")
    for key in REQUIRED_FIELDS:
        if not isinstance(row.get(key), str) or not row[key]:
            raise UserError(f"{where}: field {key!r} must be a non-empty string")
    if not row["entry_point"].isidentifier():
        raise UserError(f"{where}: entry_point {row['entry_point']!r} is not a Python name")
    solution = row.get("canonical_solution")
    return CodingTask(
        row["task_id"],
        row["prompt"],
        row["entry_point"],
        row["test"],
        solution if isinstance(solution, str) else None,
    )


def extract_code(prompt: str, completion: str) -> str:
    """The part of `completion` that continues the prompt's function.

    1. A markdown fence: take its content.
    2. If the model rewrote the whole function (starts with `def`), keep that
       definition: it replaces the prompt's.
    3. Otherwise keep body lines until the first top-level statement (a new
       def/class/decorator, `if __name__`, a fence, or any unindented code).
    4. Re-indent the body when its indentation differs from the prompt's.
    """
    lines = _unfence(completion).splitlines()
    first = next((ln for ln in lines if ln.strip()), "")
    if first.startswith(("def ", "async def ")):
        return _first_block(lines)
    kept = []
    for line in lines:
        if line.strip() and not line[0].isspace():
            break
        kept.append(line)
    return _reindent("\n".join(kept), _body_indent(prompt))


def _unfence(completion: str) -> str:
    """Code before a closing fence, or the content of the first fenced block after prose."""
    at = completion.find("```")
    if at < 0:
        return completion
    before = completion[:at]
    if any(line.strip() and line[0].isspace() for line in before.splitlines()):
        return before  # body code, then a fence that closes it
    fenced = FENCE.search(completion, at)
    return fenced.group(1) if fenced else before


def _first_block(lines: list[str]) -> str:
    """A top-level def and its body, up to the next unindented statement."""
    kept: list[str] = []
    for line in lines:
        if kept and line.strip() and not line[0].isspace():
            break
        if kept or line.strip():
            kept.append(line)
    return "\n".join(kept)


def _body_indent(prompt: str) -> str:
    """Indentation of the prompt's last non-blank line (the docstring's), or 4 spaces."""
    for line in reversed(prompt.splitlines()):
        if line.strip():
            indent = line[: len(line) - len(line.lstrip())]
            return indent or "    "
    return "    "


def _reindent(body: str, indent: str) -> str:
    lines = body.splitlines()
    first = next((ln for ln in lines if ln.strip()), None)
    if first is None:
        return body
    have = first[: len(first) - len(first.lstrip())]
    if have == indent or not have:
        return body
    out = []
    for line in lines:
        stripped = line[len(have) :] if line.startswith(have) else line.lstrip()
        out.append(indent + stripped if line.strip() else line)
    return "\n".join(out)


def build_program(task: CodingTask, code: str) -> str:
    """prompt + code: the untrusted part, run in the sandbox's tested process."""
    if code.lstrip().startswith(("def ", "async def ")):
        return f"{task.prompt}\n{code}\n"
    return f"{task.prompt}{code}\n"


def build_test(task: CodingTask) -> str:
    """prompt (its last function's body left as `pass`) + test: run by the sandbox's checker.

    The prompt brings the imports and helper functions a test may use; the
    entry point itself is replaced by a stand-in that calls the tested process.
    """
    stub = f"{task.prompt.rstrip()}\n{_body_indent(task.prompt)}pass\n"
    return f"{stub}\n\n{task.test}\n"


def evaluate(task: CodingTask, completion: str, limits: SandboxLimits) -> ExecResult:
    """Extract the code from `completion`, run the task's tests in the sandbox."""
    program = build_program(task, extract_code(task.prompt, completion))
    return run_program(program, build_test(task), task.entry_point, limits)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task: n samples, c of them correct (Chen et al. 2021)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n; got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_at_k_summary(passed_per_task: list[list[bool]]) -> dict[str, float]:
    """Mean pass@k over tasks for k = 1 and k = n (when n > 1); keys `pass_at_1`, `pass_at_<n>`."""
    if not passed_per_task:
        return {}
    n = min(len(samples) for samples in passed_per_task)
    ks = [1] + ([n] if n > 1 else [])
    return {
        f"pass_at_{k}": sum(pass_at_k(len(s), sum(s), k) for s in passed_per_task)
        / len(passed_per_task)
        for k in ks
    }
