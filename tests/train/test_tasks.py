"""The task generator: canonical solutions pass their tests; held-out combinations stay unseen."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddtune.assets import default_tasks_file
from ddtune.errors import UserError
from ddtune.train.tasks import heldout_tasks, is_heldout, iter_tasks, read_jsonl, write_jsonl

HUMANEVAL_FIELDS = {"task_id", "prompt", "entry_point", "test", "canonical_solution"}


def _run_all(tasks: list[dict], tmp_path: Path) -> list[str]:
    """Execute every task's canonical solution against its check() in ONE fresh interpreter."""
    runner = tmp_path / "run.py"
    runner.write_text(
        "import json, sys\n"
        "failed = []\n"
        "for task in json.load(open(sys.argv[1])):\n"
        "    ns = {}\n"
        "    try:\n"
        "        exec(task['prompt'] + task['canonical_solution'] + task['test'], ns)\n"
        "        ns['check'](ns[task['entry_point']])\n"
        "    except Exception as exc:\n"
        "        failed.append(task['task_id'] + ': ' + repr(exc))\n"
        "print(json.dumps(failed))\n"
    )
    data = tmp_path / "tasks.json"
    data.write_text(json.dumps(tasks))
    out = subprocess.run(
        [sys.executable, "-I", str(runner), str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout)


def test_training_tasks_pass_their_own_tests(tmp_path: Path) -> None:
    tasks = [json.loads(t.to_json()) for t in itertools.islice(iter_tasks(7, "train"), 400)]
    assert _run_all(tasks, tmp_path) == []


def test_a_wrong_body_fails_the_tests(tmp_path: Path) -> None:
    tasks = [json.loads(t.to_json()) for t in itertools.islice(iter_tasks(7, "train"), 50)]
    for task in tasks:
        task["canonical_solution"] = "    return 0\n"
    failed = _run_all(tasks, tmp_path)
    assert len(failed) >= 45  # a constant answer fails (nearly) every task


def test_shipped_heldout_file_is_humaneval_and_passes(tmp_path: Path) -> None:
    rows = read_jsonl(default_tasks_file())
    assert 40 <= len(rows) <= 60
    assert all(set(row) >= HUMANEVAL_FIELDS for row in rows)
    assert all("def check(candidate):" in row["test"] for row in rows)
    assert len({row["task_id"] for row in rows}) == len(rows)
    assert _run_all(rows, tmp_path) == []
    assert all(is_heldout(row["combo"]) for row in rows)


def test_shipped_file_is_what_the_command_writes(tmp_path: Path) -> None:
    write_jsonl(heldout_tasks(50, 1234), tmp_path / "h.jsonl")
    assert (tmp_path / "h.jsonl").read_text() == default_tasks_file().read_text()


def test_heldout_combinations_never_appear_in_training() -> None:
    train = list(itertools.islice(iter_tasks(0, "train"), 5000))
    heldout = {row["combo"] for row in read_jsonl(default_tasks_file())}
    train_combos = {t.combo for t in train}
    assert not heldout & train_combos
    assert not {t.prompt for t in train} & {
        row["prompt"] for row in read_jsonl(default_tasks_file())
    }
    # ...but their parts do: every operation kind of a held-out task is trained on
    train_parts = {
        (c.split(":")[0], part) for c in train_combos for part in c.split(":")[1].split("+")
    }
    for combo in heldout:
        family, kinds = combo.split(":")
        assert all((family, kind) in train_parts for kind in kinds.split("+")), combo


def test_generation_is_deterministic_in_the_seed() -> None:
    first = [t.text() for t in itertools.islice(iter_tasks(3, "train"), 30)]
    again = [t.text() for t in itertools.islice(iter_tasks(3, "train"), 30)]
    other = [t.text() for t in itertools.islice(iter_tasks(4, "train"), 30)]
    assert first == again and first != other


def test_bad_split_and_bad_file_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="split must be"):
        next(iter_tasks(0, "dev"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "x", "prompt": "def f():\\n"}\nnot json\n')
    with pytest.raises(UserError, match=r"bad.jsonl:1: missing field\(s\) entry_point, test"):
        read_jsonl(bad)
