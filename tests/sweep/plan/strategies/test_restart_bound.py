"""The restart-bound race over a real store: the mode chosen from the costs and kept with
the sweep, one trial planned at a time from the stored results, `sweep plan`'s words and
hours, and its expected hours against the simulated wall time."""

from __future__ import annotations

import statistics
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from simulated_service import Costs, NoiseModel, SimulatedService, run_start_race

from ddtune.bench.result import BenchResult
from ddtune.cli import main
from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.sweep.plan import parse_spec, read_spec
from ddtune.sweep.plan.costs import trial_costs
from ddtune.sweep.plan.prepare import prepare
from ddtune.sweep.plan.strategies.race import Race
from ddtune.sweep.plan.strategies.restart_bound import RestartBoundRace, start_settings
from ddtune.sweep.store.db import PlannedTrial, Store
from ddtune.sweep.store.modes import SweepMode

EXAMPLE = Path(__file__).parents[4] / "examples" / "sglang-ddtree-systemd.toml"
SERVICE = """
[service]
command = ["python", "-m", "ddtune.cli", "serve", "--port", "{port}", "--budget", "{budget}"]
port = 18000
"""
RACE = """
[sweep]
name = "rb"
strategy = "race"
seed = 3
baseline = { mode = "ar" }
[space]
budget = [4, 8, 16]
topk = [2, 4]
"""


def _spec(sweep: str = RACE, service: str = SERVICE, costs: str = "", extra: str = ""):
    text = textwrap.dedent(sweep) + extra + textwrap.dedent(service) + costs
    return parse_spec(text, source="t.toml")


COSTS = "expected_start_s = 420\nexpected_bench_s = 60\n"
MODE = SweepMode(True, "restart_bound = true", 5.0, 2.0, 4)


@pytest.mark.parametrize(
    ("service", "costs", "extra", "restart_bound", "words"),
    [
        (SERVICE, COSTS, "", True, "auto: a restart (420 s) takes at least one bench (60 s)"),
        (SERVICE, "expected_start_s = 30\nexpected_bench_s = 60\n", "", False, "less than"),
        (SERVICE, "", "", False, "no costs known"),
        (SERVICE.replace("[service]\n", '[service]\ncontrol = "hot"\n'), COSTS, "", False, "hot"),
        (SERVICE, "", "restart_bound = true\n", True, "restart_bound = true"),
        (SERVICE, COSTS, "restart_bound = false\n", False, "restart_bound = false"),
    ],
)
def test_the_mode_follows_the_costs_unless_pinned(service, costs, extra, restart_bound, words):
    sweep = RACE.replace("seed = 3\n", "seed = 3\n" + extra)
    spec = _spec(sweep, service, costs)
    mode = Race.choose_mode(spec, trial_costs(spec, None))
    assert mode.restart_bound is restart_bound and words in mode.reason
    assert mode.most_benches == (4 if restart_bound else 1)


def test_a_stored_mode_stays_with_its_sweep(tmp_path):
    spec = _spec(costs=COSTS)
    store = Store(tmp_path / "store.sqlite")
    kept = SweepMode(False, "chosen earlier")
    store.open_sweep(spec.name, spec.text, spec.hash, [], None, kept)
    assert prepare(spec, store).mode == kept  # the costs would now choose restart-bound
    assert prepare(replace(spec, name="other"), store).mode.restart_bound


def test_the_race_plans_one_trial_at_a_time_from_the_store(tmp_path):
    spec = _spec(costs=COSTS)
    mode = Race.choose_mode(spec, trial_costs(spec, None))
    store = Store(tmp_path / "store.sqlite")
    sweep_id = store.open_sweep(spec.name, spec.text, spec.hash, [], None, mode)
    race = RestartBoundRace(spec, mode)
    service = SimulatedService(_rates(spec), NoiseModel(drift_sd=0.0), seed=3)
    ran = 0
    while rows := race.next_batch(store, sweep_id):
        assert len(rows) == 1
        row = rows[0]
        start, bench = divmod(row["repeat"] - 1, mode.most_benches)
        if bench == 0:
            service.start(row["label"])
        _finish(store, row, service.bench(row["label"], splits=4).value, fresh=bench == 0)
        ran += 1
    state = race.state()
    assert state.stop is not None and ran == state.trials_done
    fresh = RestartBoundRace(spec, mode).state(store, sweep_id)  # a resumed runner's replay
    assert (fresh.alive, fresh.stop, fresh.pass_no) == (state.alive, state.stop, state.pass_no)
    assert state.alive == ["ddtree b16 k4 wnone"]
    context = race.context(store, store.sweep_row(spec.name))
    assert context.efforts["ar"] == (1, 1) and context.verdict is not None
    assert "Restart-bound race" in context.notes[0]


def test_sweep_plan_says_the_mode_and_the_hours_of_the_example(capsys, tmp_path):
    """The example as shipped (without the engine's argument check: no SGLang here)."""
    spec = tmp_path / "example.toml"
    spec.write_text(
        EXAMPLE.read_text().replace("[service]\n", "[service]\nengine_check = false\n", 1)
    )
    store = tmp_path / "none.sqlite"
    assert main(["sweep", "plan", str(spec), "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "race mode: restart-bound: auto: a restart (480 s) takes at least one bench" in out
    for case in ("best case", "expected (median)", "worst case"):
        assert f"restart-bound race, {case}:" in out
    assert "the pass-by-pass race (restart_bound = false), best case: 51 trial(s)" in out
    assert "planned now: 0 trial(s)" in out


def test_the_expected_hours_are_within_25_percent_of_the_simulated_median():
    """The example's spec against the production landscape (the best 5% ahead, noise 1.5%
    a start, 3% a request, drift 1%/h): `sweep plan`'s expected case vs 12 simulated races."""
    spec = read_spec(EXAMPLE)
    costs = trial_costs(spec, None)
    assert costs is not None
    mode = Race.choose_mode(spec, costs)
    expected = RestartBoundRace(spec, mode).estimates(costs)[
        "restart-bound race, expected (median)"
    ]
    settings = start_settings(spec, mode)
    rates = _production_rates()
    noise = NoiseModel(
        start_sd=0.015, request_sd=0.03, requests=24, drift_sd=0.0, trend_per_hour=0.01
    )
    hours = []
    for seed in range(12):
        service = SimulatedService(rates, noise, seed, costs=Costs(480.0, 300.0))
        run_start_race(service, list(rates), "ar", settings, seed)
        hours.append(service.hours)
    simulated = statistics.median(hours)
    assert abs(expected.hours - simulated) / simulated < 0.25, (expected.hours, simulated)


def _production_rates() -> dict[str, float]:
    budget, topk, window = (
        {4: 0.75, 8: 0.9, 12: 1.0, 16: 0.94},
        {4: 1.0, 6: 0.95},
        {None: 1, 2048: 0.92},
    )
    rates = {"ar": 45.0}
    for b, fb in budget.items():
        for k, fk in topk.items():
            for w, fw in window.items():
                rates[DecodeParams("ddtree", b, k, w).label()] = 100.0 * fb * fk * fw
    return rates


def _rates(spec) -> dict[str, float]:
    """ar 50; ddtree best at budget 16, topk 4, the rest 8-40% behind."""
    out = {}
    for config, _ in spec.all_configs():
        p = config.params
        out[config.label()] = (
            50.0 if p.mode == "ar" else 100.0 - 4.0 * abs(p.budget - 16) ** 0.6 - 8.0 * (4 - p.topk)
        )
    return out


def _finish(store: Store, row, value: float | None, fresh: bool) -> None:
    attempt_id, _ = store.begin_attempt(row["id"])
    timings = {"bench_s": 60.0} | ({"start_to_ready_s": 420.0} if fresh else {"reused_start": 1.0})
    bench = {"aggregates": {"short_tps": value, "long_tps": value}, "samples": [], "outputs": []}
    store.record_result(row["id"], attempt_id, BenchResult.from_dict(bench), timings=timings)


@pytest.mark.parametrize("seed", [19, 26])
def test_a_stated_start_spread_keeps_one_start_from_deciding(seed):
    """A machine whose starts move a config's level by 12% (a shared CPU host; the prior says
    3%), plain decoding truly 8% ahead: on the prior, the race separated the slower config
    after 3-4 starts (this seed); with `start_spread = 0.12` it does not, and goes on to
    start again."""
    noise = NoiseModel(start_sd=0.12, request_sd=0.03, drift_sd=0.0)
    rates = {"ar": 100.0, "b": 92.0}
    runs = {}
    for spread in (None, 0.12):
        settings = replace(
            start_settings(_spec(_with_spread(spread) if spread else RACE), MODE),
            tolerance=0.05,
            start_s=5.0,
            bench_s=2.0,
        )
        service = SimulatedService(rates, noise, seed, costs=Costs(5.0, 2.0))
        race = run_start_race(service, list(rates), "ar", settings, seed)
        runs[spread] = (race.verdict(str), service.starts)
    (on_prior, few), (stated, more) = runs[None], runs[0.12]
    assert on_prior.status == "separated" and on_prior.label == "b" and few <= 4
    assert not (stated.status == "separated" and stated.label == "b") and more > few


def test_start_spread_is_read_by_restart_bound_races_only():
    spec = _spec(_with_spread(0.12))
    assert start_settings(spec, MODE).priors.start.sd == 0.12
    assert start_settings(_spec(), MODE).priors.start.sd == 0.03
    with pytest.raises(UserError, match="start_spread is read by a restart-bound race only.*grid"):
        _spec(_with_spread(0.1).replace('strategy = "race"', 'strategy = "grid"'))
    with pytest.raises(UserError, match="start_spread .* pinned to pass by pass"):
        _spec(_with_spread(0.1).replace("seed = 3\n", "seed = 3\nrestart_bound = false\n"))


def _with_spread(spread: float) -> str:
    return RACE.replace("seed = 3\n", f"seed = 3\nstart_spread = {spread}\n")


def _earlier_grid(store: Store, passes: int, start_sd: float) -> None:
    """A grid sweep named "earlier" of the same service, one start per config and pass, on a
    simulated machine whose starts move a config's level by `start_sd`."""
    spec = replace(_spec(RACE.replace('"race"', '"grid"')), name="earlier", repeats=passes)
    plan = [
        PlannedTrial(i, config, p, base)
        for i, (p, (config, base)) in enumerate(
            (p, c) for p in range(1, passes + 1) for c in spec.all_configs()
        )
    ]
    sweep_id = store.open_sweep(spec.name, spec.text, spec.hash, plan)
    noise = NoiseModel(start_sd=start_sd, request_sd=0.02, drift_sd=0.0)
    service = SimulatedService(_rates(spec), noise, seed=5)
    for row in store.trials(sweep_id):
        service.start(row["label"])
        _finish(store, row, service.bench(row["label"], splits=4).value, fresh=True)


def test_the_start_spread_is_measured_on_the_stores_earlier_sweeps(tmp_path):
    """A new restart-bound race in a store that holds a 4-pass grid of a 12% machine takes
    the spread measured there as its start prior, keeps it when resumed, and says where it
    came from; a stated spread wins; a store whose configs each started once measures none."""
    store = Store(tmp_path / "store.sqlite")
    _earlier_grid(store, passes=4, start_sd=0.12)
    spec = _spec(costs=COSTS)
    sweep = prepare(spec, store)
    assert sweep.mode.spread is not None and 0.07 < sweep.mode.spread.sd < 0.18
    assert start_settings(spec, sweep.mode).priors.start.sd == sweep.mode.spread.sd
    assert "repeated start(s) in sweep(s) earlier of" in sweep.estimate_text()
    store.open_sweep(spec.name, spec.text, spec.hash, [], None, sweep.mode)
    assert prepare(spec, store).mode.spread == sweep.mode.spread  # fixed with the sweep
    stated = prepare(replace(_spec(_with_spread(0.2), costs=COSTS), name="stated"), store)
    assert stated.mode.spread is None and "20% a start (stated" in stated.estimate_text()
    once = Store(tmp_path / "once.sqlite")
    _earlier_grid(once, passes=1, start_sd=0.12)
    assert prepare(spec, once).mode.spread is None
    assert "3% a start (assumed" in prepare(spec, once).estimate_text()


def test_the_cost_models_start_spread_is_stated_fixed_or_measured_in_the_store(tmp_path):
    """`Sweep.start_sd`, what the round-cost model's predictions take: a stated spread, the
    one fixed with a restart-bound race (the prior where it fixed none), else, for a sweep not
    restart-bound, the store's measured one (a grid's own passes count, as in its report)."""
    store = Store(tmp_path / "store.sqlite")
    _earlier_grid(store, passes=4, start_sd=0.12)
    measured = prepare(_spec(costs=COSTS), store)
    assert measured.mode.spread is not None
    assert measured.start_sd(None) == measured.start_sd(store) == measured.mode.spread.sd
    stated = prepare(replace(_spec(_with_spread(0.2), costs=COSTS), name="stated"), store)
    assert stated.start_sd(store) == 0.2
    fresh = prepare(_spec(costs=COSTS), None)  # restart-bound, created without a store
    assert fresh.mode.spread is None and fresh.start_sd(store) == 0.03  # as its race's
    grid = replace(fresh, mode=SweepMode(False, "pass by pass"))
    assert grid.start_sd(None) == 0.03
    assert 0.07 < grid.start_sd(store) < 0.18  # the store's grid measures it
    for sweep in (measured, stated, fresh):  # the race and the cost model take one spread
        assert start_settings(sweep.spec, sweep.mode).priors.start.sd == sweep.start_sd(store)
