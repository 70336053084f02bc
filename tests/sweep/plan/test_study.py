"""Optuna search: space parsing (errors name the key), ask/tell in SQLite, FAIL, resume after SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.sweep.plan.study import Search, SearchSpace

SPACE = {
    "budget": {"low": 2, "high": 256, "log": True},
    "topk": {"low": 1, "high": 8},
    "window": ["none", 64],
}


def _value(params: DecodeParams) -> float:
    """A deterministic objective with its optimum near budget 16, topk 4."""
    return 100.0 - abs(params.budget - 16) - 3 * abs(params.topk - 4)


def test_space_size_counts_canonical_configs():
    assert SearchSpace.from_table(SPACE).size() == 255 * 8 * 2
    mixed = SearchSpace.from_table(
        {"mode": ["ar", "dflash", "ddtree"], "budget": [4, 8], "window": ["none", 64]}
    )
    assert mixed.size() == 1 + 2 + 2 * 1 * 2
    with_vars = SearchSpace.from_table({"budget": [4, 8], "vars": {"block": [8, 16, 32]}})
    assert with_vars.size() == 6


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"budget": {"low": 9, "high": 2}}, "space.budget.low"),
        ({"budget": [4]}, "space"),  # a single point
        ({"budget": {"low": 0, "high": 8, "log": True}}, "space.budget.log"),
        ({"budget": {"low": 1, "high": 8, "lo": 2}}, "space.budget.lo"),
        ({"strategy": "race"}, "space.strategy"),
        ({"mode": ["ddtree", "turbo"], "budget": [4, 8]}, "space.mode"),
        ({"window": ["all", 64]}, "space.window"),
        ({"topk": [], "budget": [4, 8]}, "space.topk"),
        ({"budget": [4, 4]}, "space.budget"),
        ({"budget": {"low": 2, "high": 8, "step": 0}}, "space.budget.step"),
    ],
)
def test_bad_spaces_name_the_key(table, key):
    with pytest.raises(UserError) as excinfo:
        SearchSpace.from_table(table)
    assert excinfo.value.key == key
    assert "\n" not in str(excinfo.value)


def test_ask_tell_fail_and_best(tmp_path):
    search = Search(SearchSpace.from_table(SPACE), tmp_path / "s.sqlite", study_name="t", seed=1)
    told = []
    for i in range(12):
        proposal = search.ask()
        assert proposal.params.mode == "ddtree" and 2 <= proposal.params.budget <= 256
        value = None if i == 4 else _value(proposal.params)
        search.tell(proposal.number, value)
        told.append((proposal, value))
    states = [t.state.name for t in search.study.trials]
    assert states.count("FAIL") == 1 and states[4] == "FAIL"  # a failure, not a zero
    assert len(search.completed()) == 11
    best = search.best(3)
    values = {p.number: v for p, v in told if v is not None}
    assert [values[p.number] for p in best] == sorted(values.values(), reverse=True)[:3]


def test_constraint_marks_infeasible_trials(tmp_path):
    search = Search(SearchSpace.from_table(SPACE), None, study_name="c", seed=2)
    first = search.ask()
    search.tell(first.number, 1000.0, constraint=0.2)  # fastest, but violates the constraint
    second = search.ask()
    search.tell(second.number, 10.0, constraint=-0.1)
    assert [p.number for p in search.best(2)] == [second.number]


def test_proposals_depend_only_on_history_not_on_restarts(tmp_path):
    space = SearchSpace.from_table(SPACE)
    straight = Search(space, None, study_name="a", seed=5)
    expected = [_run_one(straight) for _ in range(14)]
    path = tmp_path / "s.sqlite"
    got = [_run_one(Search(space, path, study_name="b", seed=5)) for _ in range(7)]
    reopened = Search(space, path, study_name="b", seed=5)
    got += [_run_one(reopened) for _ in range(7)]
    assert got == expected


def _run_one(search: Search) -> DecodeParams:
    proposal = search.ask()
    search.tell(proposal.number, _value(proposal.params))
    return proposal.params


def test_an_asked_but_untold_trial_is_handed_back(tmp_path):
    space = SearchSpace.from_table(SPACE)
    search = Search(space, tmp_path / "s.sqlite", study_name="r", seed=0)
    pending = search.ask()
    again = Search(space, tmp_path / "s.sqlite", study_name="r", seed=0).ask()
    assert again == pending and len(search.study.trials) == 1


CHILD = """
import sys, time
from pathlib import Path
from ddtune.sweep.plan.study import Search, SearchSpace
sys.path.insert(0, {tests!r})
from test_study import SPACE, _value
search = Search(SearchSpace.from_table(SPACE), Path({path!r}), study_name="k", seed=9)
while True:
    proposal = search.ask()
    print(proposal.number, flush=True)
    time.sleep(0.05)
    search.tell(proposal.number, _value(proposal.params))
"""


def test_sigkill_and_resume_loses_nothing_and_decides_the_same(tmp_path):
    space = SearchSpace.from_table(SPACE)
    straight = Search(space, None, study_name="u2", seed=9)
    expected = [_run_one(straight) for _ in range(16)]
    path = tmp_path / "killed.sqlite"
    code = CHILD.format(tests=str(Path(__file__).parent), path=str(path))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None
    for line in child.stdout:
        if int(line) >= 6:  # mid-trial: trial 6 is asked, maybe not told
            break
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    resumed = Search(space, path, study_name="k", seed=9)
    finished = resumed.completed()
    assert len(finished) >= 6  # every trial told before the kill is kept
    params = [proposal.params for proposal, _ in finished]
    while len(resumed.study.trials) < 16 or resumed.running():
        params.append(_run_one(resumed))
    assert params == expected
