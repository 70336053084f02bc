"""Strategies as plug-ins and a sweep prepared once: the table is the one list of the
spec's words, nothing outside the strategies branches on a strategy's name (no file is
exempt), a new strategy is one module and one table line, nothing but `prepare` derives
the mode, the run spec or the plan, and `prepare` decides as before."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ddtune.errors import UserError
from ddtune.sweep.plan.prepare import plan_spec, prepare
from ddtune.sweep.plan.strategies import STRATEGIES
from ddtune.sweep.plan.strategies.base import Strategy
from ddtune.sweep.plan.strategies.race import Race
from ddtune.sweep.plan.strategies.restart_bound import RestartBoundRace
from ddtune.sweep.spec import parse
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.modes import SweepMode

SRC = Path(__file__).parents[4] / "src" / "ddtune"
REGISTRY = SRC / "sweep" / "plan" / "strategies"
NAMES = "|".join(STRATEGIES)
BRANCHES = [
    re.compile(r"strategy\s*(==|!=)\s*[\"']"),  # x.strategy == "race"
    re.compile(r"strategy\s+(not\s+)?in\s*[\(\[\{]"),  # strategy in ("race", "predict")
    re.compile(rf"[\"']({NAMES})[\"']\s*(==|!=|in\b)[^#\n]*strategy"),  # "race" == strategy
    re.compile(r"match\s+\S*strategy\b"),  # match spec.strategy:
]


def _sources(exempt: list[Path]) -> list[Path]:
    return [
        path
        for path in sorted(SRC.rglob("*.py"))
        if not any(path == e or e in path.parents for e in exempt)
    ]


def test_the_table_is_the_one_list_of_the_words_a_spec_can_name(spec_text):
    assert all(strategy.name == word for word, strategy in STRATEGIES.items())
    with pytest.raises(UserError) as info:
        spec_text.parse('[sweep]\nname = "b"\nstrategy = "bandit"\n[space]\nbudget = [4]\n')
    assert info.value.key == "sweep.strategy"
    assert "'grid', 'race', 'optuna' or 'predict'" in str(info.value)


def test_nothing_outside_the_strategies_branches_on_a_strategy_name():
    found = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for path in _sources([REGISTRY])
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if any(pattern.search(line) for pattern in BRANCHES)
    ]
    assert found == []


def test_the_patterns_catch_the_branching_they_forbid():
    lines = [
        'if spec.strategy == "race":',
        "if strategy != 'grid':",
        'return self.strategy in ("race", "predict")',
        'if "optuna" == sweep.strategy:',
        "match spec.strategy:",
    ]
    assert all(any(p.search(line) for p in BRANCHES) for line in lines)
    assert not any(p.search("strategy = rules.runs_as(spec, mode)(spec, mode)") for p in BRANCHES)


class Alternate(Strategy):
    """A strategy written for this test: every config once, then done."""

    name = "once"

    def first_trials(self):
        return plan_spec_once(self.spec)


def plan_spec_once(spec):
    from ddtune.sweep.plan.trial_order import plan_trials

    return plan_trials(spec.all_configs(), 1, "interleaved", spec.seed)


def test_a_new_strategy_is_one_class_and_one_table_line(spec_text):
    """Nothing else learns its name: the spec reads it, `prepare` binds it."""
    table = {**STRATEGIES, Alternate.name: Alternate}
    text = spec_text.toml('[sweep]\nname = "n"\nstrategy = "once"\n[space]\nbudget = [4, 8]\n')
    spec = parse.parse_with(text, table, source="t.toml")
    assert spec.strategy == "once" and spec.repeats == 10  # the base class's default
    strategy = Alternate.runs_as(spec, Alternate.choose_mode(spec, None))(
        spec, SweepMode(False, "")
    )
    assert len(strategy.first_trials()) == 2 and strategy.next_batch(None, 1) == []  # type: ignore[arg-type]
    assert not strategy.plans_later and strategy.estimates(None) == {}  # type: ignore[arg-type]


def test_only_prepare_derives_the_mode_the_run_spec_and_the_plan():
    """The spec → mode → run spec → plan chain is computed in `plan/prepare.py` alone."""
    calls = re.compile(r"\b(choose_mode|runs_as|read_mode|first_trials)\(")
    allowed = {
        SRC / "sweep" / "plan" / "prepare.py",
        SRC / "sweep" / "store" / "modes.py",  # read_mode's definition
    }
    found = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for path in _sources([REGISTRY])
        if path not in allowed
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if calls.search(line) and not line.lstrip().startswith(("def ", "#"))
    ]
    assert found == []


RACE = """
[sweep]
name = "r"
strategy = "race"
min_repeats = 2
repeats = 4
passes_per_start = 2
baseline = { mode = "ar" }
[[configs]]
mode = "ddtree"
budget = 16
[[configs]]
mode = "ddtree"
budget = 32
"""


def test_a_race_prepared_without_costs_plans_its_first_passes(spec_text):
    sweep = prepare(spec_text.parse(RACE), None)
    assert not sweep.mode.restart_bound and isinstance(sweep.strategy, Race)
    assert sweep.run_spec == sweep.spec and sweep.costs is None and sweep.estimates() == {}
    assert len(sweep.plan) == 3 * 2  # 3 configs x min_repeats passes
    assert list(sweep.plan) == plan_spec(sweep.spec)
    assert "later passes are planned one by one" in sweep.strategy.later


def test_a_costly_restart_makes_the_race_restart_bound(spec_text):
    costly = "expected_start_s = 400\nexpected_bench_s = 60\n"
    sweep = prepare(spec_text.parse(RACE, costly), None)
    assert sweep.mode.restart_bound and type(sweep.strategy) is RestartBoundRace
    assert sweep.plan == () and sweep.run_spec.passes_per_start == sweep.mode.most_benches
    assert sweep.spec.passes_per_start == 2  # the estimates compare with the spec as written
    cases = sweep.estimates()
    assert "restart-bound race, expected (median)" in cases
    assert "the pass-by-pass race (restart_bound = false), worst case" in cases
    assert "race mode: restart-bound" in sweep.estimate_text()


def test_a_stored_mode_wins_over_the_costs_of_now(tmp_path, spec_text):
    """Resume decides as before: the mode kept with the sweep, not the one the costs would choose now."""
    spec = spec_text.parse(RACE, "expected_start_s = 400\nexpected_bench_s = 60\n")
    store = Store(tmp_path / "store.sqlite")
    try:
        kept = SweepMode(False, "chosen earlier")
        sweep_id = store.open_sweep(spec.name, spec.text, spec.hash, [], None, kept)
        assert prepare(spec, store).mode == kept
        assert type(prepare(spec, store, sweep_id).strategy) is STRATEGIES["race"]
    finally:
        store.close()


GRID = """
[sweep]
name = "g"
repeats = 2
[[configs]]
mode = "ddtree"
budget = 16
"""


@pytest.mark.parametrize(
    ("text", "restart_bound", "runs_as"),
    [
        (GRID, True, "grid"),  # a grid is never restart-bound
        (RACE, False, "race"),
        (RACE, True, "restart-bound race"),
    ],
)
def test_each_strategy_runs_as_its_mode_says(spec_text, text, restart_bound, runs_as):
    spec = spec_text.parse(text)
    assert STRATEGIES[spec.strategy].runs_as(spec, SweepMode(restart_bound, "")).name == runs_as


def test_a_grid_plans_every_trial_and_nothing_later(spec_text):
    sweep = prepare(spec_text.parse(GRID), None)
    assert [t.repeat for t in sweep.plan] == [1, 2]
    assert sweep.strategy.later == "" and not sweep.strategy.plans_later
