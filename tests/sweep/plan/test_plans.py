"""Races and searches planned over a real store, with the simulated service standing in for
the servers: passes planned from stored results, a search told its results (FAIL for a
failed trial), its best confirmed by a race; cost estimates and `sweep plan`."""

from __future__ import annotations

import math

import pytest
from simulated_service import NoiseModel, SimulatedService

from ddtune.bench.result import BenchResult
from ddtune.cli import main
from ddtune.sweep.plan.costs import trial_costs
from ddtune.sweep.plan.prepare import plan_spec, prepare
from ddtune.sweep.plan.strategies.optuna import CONFIRM_SUFFIX, Optuna
from ddtune.sweep.plan.strategies.race import Race
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.modes import SweepMode

COSTS = "expected_start_s = 420\nexpected_bench_s = 60\n"  # the [service] table's estimates
RACE = """
[sweep]
name = "r"
strategy = "race"
min_repeats = 3
repeats = 8
restart_bound = false
baseline = { mode = "ar" }
[space]
budget = [4, 8, 16, 32]
topk = [2, 4]
"""
OPTUNA = """
[sweep]
name = "o"
strategy = "optuna"
repeats = 6
baseline = { mode = "ar" }
[space]
budget = { low = 2, high = 64, log = true }
topk = { low = 1, high = 8 }
[optuna]
n_trials = 12
confirm_top = 2
"""


def _rate(label: str) -> float:
    """True throughput: ar 50; ddtree best at budget 16, topk 4."""
    if label == "ar":
        return 50.0
    budget, topk = (int(part[1:]) for part in label.split()[1:3])
    return 100.0 - 2.5 * abs(budget - 16) ** 0.8 - 6.0 * abs(topk - 4)


def _finish(store: Store, row, value: float | None, timings: dict | None = None) -> None:
    attempt_id, _ = store.begin_attempt(row["id"])
    if value is None:
        store.fail_attempt(attempt_id, "crashed(1)", "simulated failure")
        store.finish_trial(row["id"], "failed")
        return
    bench = {"aggregates": {"short_tps": value, "long_tps": value}, "samples": [], "outputs": []}
    store.record_result(
        row["id"], attempt_id, BenchResult.from_dict(bench), timings=timings or {"bench_s": 60.0}
    )


def _drive(
    strategy, store: Store, sweep_id, first, service: SimulatedService, fail_every: int = 0
) -> int:
    """Run every batch the strategy hands out against the simulator; returns trials run."""
    batch, ran = list(first), 0
    while batch:
        for row in batch:
            ran += 1
            service.start(row["label"])
            value = service.bench(row["label"]).value
            _finish(store, row, None if fail_every and ran % fail_every == 0 else value)
        batch = strategy.next_batch(store, sweep_id)
    return ran


def estimates(spec, costs):
    """The named cases `sweep plan` prints for `spec` at `costs` (a new sweep's mode)."""
    return prepare(spec, None).strategy.estimates(costs)


def test_race_plans_each_pass_from_the_store_and_stops(tmp_path, spec_text):
    spec = spec_text.parse(RACE, COSTS)
    store = Store(tmp_path / "store.sqlite")
    try:
        sweep_id = store.open_sweep(spec.name, spec.text, spec.hash, plan_spec(spec))
        assert len(store.trials(sweep_id)) == 9 * 3  # the first min_repeats passes
        race = prepare(spec, store).strategy
        assert isinstance(race, Race)
        service = SimulatedService(
            {c.label(): _rate(c.label()) for c, _ in spec.all_configs()}, NoiseModel(), 1
        )
        ran = _drive(race, store, sweep_id, store.trials(sweep_id, ("pending",)), service)
        state = race.state()
        assert state.stop is not None and ran == len(store.trials(sweep_id))
        assert ran < 9 * 8  # fewer trials than the grid with the same maximum passes
        assert "ddtree b16 k4 wnone" in state.alive
        again = Race(spec, SweepMode(False, ""))  # a fresh race (a resumed run) agrees
        assert again.state(store, sweep_id).history == state.history
        assert again.next_batch(store, sweep_id) == []
        assert "stopped" in race.outcome()
    finally:
        store.close()


def test_a_race_stopped_by_max_hours_says_so(tmp_path, spec_text):
    """`state()` and `outcome()` after the run read the passes with their stored seconds: a
    race that `max_hours` stopped says so (not "not yet", as if every pass took 0 s)."""
    spec = spec_text.parse(RACE.replace("repeats = 8\n", "repeats = 8\nmax_hours = 1\n"), COSTS)
    store = Store(tmp_path / "store.sqlite")
    try:
        sweep_id = store.open_sweep(spec.name, spec.text, spec.hash, plan_spec(spec))
        race = prepare(spec, store).strategy
        assert isinstance(race, Race)
        offset = {c.label(): i for i, (c, _) in enumerate(spec.all_configs())}
        swing = (1.0, -1.0, 0.5)  # per pass, shifted by config: neither separated nor equivalent
        for row in store.trials(sweep_id, ("pending",)):  # 27 trials of 10 min: 4.5 h
            value = 100.0 * math.exp(0.1 * swing[(offset[row["label"]] + row["repeat"]) % 3])
            _finish(store, row, value, timings={"spent_s": 600.0})
        assert race.next_batch(store, sweep_id) == []
        assert race.state().stop == "max_hours" and len(race.state().alive) > 1
        assert "stopped: max_hours" in race.outcome()
    finally:
        store.close()


def test_search_tells_results_and_confirms_the_best_by_a_race(tmp_path, spec_text):
    spec = spec_text.parse(OPTUNA, COSTS)
    path = tmp_path / "store.sqlite"
    store = Store(path)
    try:
        sweep_id = store.open_sweep(spec.name, spec.text, spec.hash, plan_spec(spec))
        search = Optuna(spec, SweepMode(False, ""))
        rates = _RatesOnDemand()
        service = SimulatedService(rates, NoiseModel(), 2)
        first = search.next_batch(store, sweep_id)
        _drive(search, store, sweep_id, first, service, fail_every=5)
        search_trials = store.trials(sweep_id)
        assert len(search_trials) == 12 and [r["repeat"] for r in search_trials] == list(
            range(1, 13)
        )
        states = [t.state.name for t in search.search(store).study.trials]
        assert states.count("FAIL") == 2 and states.count("COMPLETE") == 10  # failures not zeros
        confirm = store.sweep_row(spec.name + CONFIRM_SUFFIX)
        labels = {r["label"] for r in store.trials(confirm["id"])}
        assert "ar" in labels and len(labels) == 3  # baseline + confirm_top
        assert search.race is not None and search.race.state().stop is not None
        assert (path.parent / "store.optuna.sqlite").is_file()
    finally:
        store.close()


class _RatesOnDemand(dict):
    def __missing__(self, label: str) -> float:
        return _rate(label)


def test_estimates_for_grid_race_and_search(spec_text):
    race = spec_text.parse(RACE, COSTS)
    costs = trial_costs(race, None)
    assert costs is not None and (costs.start_s, costs.bench_s) == (420, 60)
    named = estimates(race, costs)
    assert named["race, best case"].trials == 27 and named["race, worst case"].trials == 72
    assert named["race, worst case"].hours == pytest.approx(72 * 480 / 3600)
    grid = spec_text.parse(
        RACE.replace('strategy = "race"\nmin_repeats = 3\n', "").replace(
            "restart_bound = false\n", ""
        ),
        COSTS,
    )
    assert estimates(grid, costs)["grid"].trials == 9 * 8
    search = estimates(spec_text.parse(OPTUNA, COSTS), costs)
    assert search["search"].trials == 12 and search["confirm race, best case"].trials == 3 * 3
    text = prepare(race, None).estimate_text()
    assert "race, worst case: 72 trial(s), 72 restart(s), ~9.6 h" in text


def test_sweep_plan_prints_the_trials_and_the_estimate(tmp_path, capsys, spec_text):
    path = tmp_path / "race.toml"
    path.write_text(spec_text.toml(RACE, COSTS))
    assert main(["sweep", "plan", str(path), "--store", str(tmp_path / "none.sqlite")]) == 0
    out = capsys.readouterr().out
    assert (
        "race, best case: 27 trial(s)" in out and "planned now: 27 trial(s), 27 restart(s)" in out
    )
    assert "pass 1" in out and "pass 3" in out and "(baseline)" in out


def test_a_grid_estimate_agrees_with_the_plan_under_passes_per_start(tmp_path, capsys, spec_text):
    grid = RACE.replace('strategy = "race"\nmin_repeats = 3\n', "").replace(
        "repeats = 8\nrestart_bound = false", "repeats = 4\npasses_per_start = 2"
    )
    path = tmp_path / "grid.toml"
    path.write_text(spec_text.toml(grid, COSTS))
    assert main(["sweep", "plan", str(path), "--store", str(tmp_path / "none.sqlite")]) == 0
    out = capsys.readouterr().out
    # 9 configs x 4 passes; passes 1-2 share a start, so do 3-4: 18 starts
    assert "grid: 36 trial(s), 18 restart(s)" in out, out
    assert "planned now: 36 trial(s), 18 restart(s)" in out, out


def test_a_hot_sweep_counts_reconfigures_not_restarts(tmp_path, capsys, spec_text):
    path = tmp_path / "hot.toml"
    path.write_text(spec_text.toml(RACE, COSTS + 'control = "hot"\n'))
    assert main(["sweep", "plan", str(path), "--store", str(tmp_path / "none.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "27 trial(s), 27 hot reconfigure(s)" in out and "restart(s)" not in out


def test_sweep_plan_reads_the_old_service_key_names_with_one_note_each(tmp_path, capsys, spec_text):
    store = str(tmp_path / "none.sqlite")
    outputs = {}
    for name, keys in (("new", 'control = "hot"\nengine = "ddtune"\n'), ("old", 'kind = "hot"\n')):
        path = tmp_path / f"{name}.toml"
        path.write_text(spec_text.toml(RACE, COSTS + keys))
        assert main(["sweep", "plan", str(path), "--store", store]) == 0
        outputs[name] = capsys.readouterr()
    assert outputs["old"].out == outputs["new"].out  # the same plan, hot reconfigures
    assert "27 hot reconfigure(s)" in outputs["old"].out
    assert outputs["new"].err == ""
    note = (
        f"note: {tmp_path / 'old.toml'}: [service] kind is now called control: "
        'write control = "hot" (kind still reads)'
    )
    assert outputs["old"].err.splitlines() == [note]
    both = tmp_path / "both.toml"
    both.write_text(spec_text.toml(RACE, COSTS + 'kind = "process"\ncontrol = "hot"\n'))
    assert main(["sweep", "plan", str(both), "--store", store]) == 2
    err = capsys.readouterr().err
    assert (
        'both kind = "process" and control = "hot" are given' in err
        and len(err.strip().splitlines()) == 1
    ), err


def test_pass_rate_constraint_marks_significantly_worse_trials_infeasible():
    from ddtune.params import DecodeParams
    from ddtune.records import TrialRecord
    from ddtune.sweep.plan.strategies.optuna import pass_rate_constraint

    def rec(i, passed, total=20):
        metrics = {"coding_passed": passed, "coding_total": total}
        return TrialRecord(i, "x", DecodeParams(), False, i, "done", metrics=metrics)

    records = {1: rec(1, 20), 2: rec(2, 19), 3: rec(3, 5)}
    assert pass_rate_constraint(records[1], records) < 0  # the best: feasible
    assert pass_rate_constraint(records[2], records) < 0  # 19/20 vs 20/20: not significant
    assert pass_rate_constraint(records[3], records) > 0  # 5/20 vs 20/20: infeasible
    no_coding = TrialRecord(4, "x", DecodeParams(), False, 4, "done", metrics={})
    assert pass_rate_constraint(no_coding, records) is None


def test_the_live_page_says_what_a_strategy_may_add_after_the_planned_trials(spec_text):
    """`eta_more`: a race (pass by pass or restart-bound) its most trials to its limits, a
    search its budget, a grid nothing; nothing before the first report."""
    from types import SimpleNamespace

    from ddtune.records import Elimination, SweepContext

    exits = [Elimination(f"x{i}", 3, "worse", "") for i in range(2)]
    context = SweepContext("race", passes=3, exits=exits)
    running = SimpleNamespace(configs=[None] * 9, context=context)
    stopped = SimpleNamespace(configs=[None] * 9, context=SweepContext("race", stop="tie"))
    more = "if the race runs to its limits (it stops as soon as it decides)"
    for spec in (
        spec_text.parse(RACE, COSTS),
        spec_text.parse(RACE.replace("restart_bound = false", "restart_bound = true"), COSTS),
    ):
        strategy = prepare(spec, None).strategy
        assert strategy.races
        assert strategy.eta_more(None, 480.0, 0, 27) == ""
        assert strategy.eta_more(running, 480.0, 0, 27) == (
            f"; then at most 35 more trial(s) (~4.7 h) {more}"
        )
        assert strategy.eta_more(running, 480.0, 4, 27) == (
            f"; then at most 28 more trial(s) (~3.7 h) {more}"
        )
        assert strategy.eta_more(stopped, 480.0, 0, 27) == "; the race has stopped"
    grid = spec_text.parse(
        RACE.replace('strategy = "race"\nmin_repeats = 3\n', "").replace(
            "restart_bound = false\n", ""
        ),
        COSTS,
    )
    assert prepare(grid, None).strategy.eta_more(running, 480.0, 0, 27) == ""
    search = prepare(spec_text.parse(OPTUNA, COSTS), None).strategy
    for summary in (None, running):
        assert search.eta_more(summary, 480.0, 0, 27) == (
            "; the search proposes more trials until its budget is spent"
        )
