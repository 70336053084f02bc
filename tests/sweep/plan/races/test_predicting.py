"""The predicting race on a simulated service: fewer starts, the same answer; a prediction
that misses is corrected, never thrown away for a full race; other weights drop it."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from simulated_service import (
    PRODUCTION_COSTS,
    PRODUCTION_NOISE,
    SimulatedService,
    run_start_race,
)

from ddtune.params import DecodeParams
from ddtune.sweep.plan.races.by_start import FinishedBench, StartSettings
from ddtune.sweep.plan.races.predicting import PredictRace
from ddtune.sweep.plan.strategies.restart_bound import start_priors
from ddtune.trace.chains import ChainCounts
from ddtune.trace.chains.forecast import ChainRun, chains_forecast
from ddtune.trace.forecast import Forecast, config_cost
from ddtune.trace.round_cost import Shape

WORKLOADS = ("short", "long")
BUDGETS = (4, 8, 16, 32, 64)
STEP = 1 / 40  # seconds of a plain target step


def tokens(budget: int, topk: int) -> float:
    """Tokens a round: saturating with the budget; topk 8 accepts 5% less than 4."""
    return 1 + 3.0 * (1 - math.exp(-budget / 6)) * (0.95 if topk == 8 else 1.0)


def seconds(budget: int) -> float:
    return STEP * (1.3 + 0.08 * (budget + 1) + 0.3)  # b8 best, b16 7% behind


def forward(tokens: int) -> float:
    """A target forward over `tokens` tokens (what probes of the running baseline measure)."""
    return STEP * (1 + 0.08 * (tokens - 1))


def landscape() -> tuple[dict[str, dict[str, Shape]], dict[str, dict[str, float]]]:
    """(shapes, true tok/s) of ar + ddtree budgets x topk {4, 8}, window none."""
    shapes = {"ar": {w: Shape("ar", 1.0, 1, 0.0, 1.0) for w in WORKLOADS}}
    tps = {"ar": {w: 1 / STEP for w in WORKLOADS}}
    for b in BUDGETS:
        for k in (4, 8):
            label = f"b{b} k{k}"
            r = tokens(b, k)
            shapes[label] = {w: Shape("ddtree", r, b + 1, 1.0, r) for w in WORKLOADS}
            tps[label] = {w: r / seconds(b) for w in WORKLOADS}
    return shapes, tps


def settings(spread: float | None = None) -> StartSettings:
    priors = start_priors(spread)  # the 3% prior where no spread is stated
    return StartSettings(tolerance=0.03, most_benches=4, start_s=480.0, bench_s=75.0, priors=priors)


def _service(tps: dict[str, dict[str, float]], seed: int):  # noqa: ANN202
    """The simulated service whose configs run at `tps`, and their objectives."""
    objective = {x: math.sqrt(t["short"] * t["long"]) for x, t in tps.items()}
    service = SimulatedService(
        objective, PRODUCTION_NOISE, seed, costs=PRODUCTION_COSTS, workloads=tps
    )
    return objective, service


def _world(seed: int):  # noqa: ANN202
    """(shapes, objectives, the exact forecast, the service) of `landscape`."""
    shapes, tps = landscape()
    objective, service = _service(tps, seed)
    cost = lambda label: (label != "ar", int(label[1:].split()[0]) if label != "ar" else 0, label)  # noqa: E731
    forecast = Forecast(shapes, {x: s["short"].acceptance for x, s in shapes.items()}, cost)
    return shapes, objective, forecast, service


def run(seed: int, tau_factor: float = 1.0, probed: bool = True, spread: float | None = None):
    shapes, objective, forecast, service = _world(seed)
    labels = list(objective)
    race = PredictRace(tuple(labels), "ar", settings(spread), seed, forecast=forecast)
    seen: list[FinishedBench] = []
    add = race.add
    race.add = lambda result: (seen.append(result), add(result))[1]  # type: ignore[method-assign]
    race.seen = seen  # type: ignore[attr-defined]
    measured = {
        x: {w: (s.acceptance or 1.0) * (tau_factor if x != "ar" else 1.0) for w, s in by.items()}
        for x, by in shapes.items()
    }
    probes = forward if probed else None
    done = run_start_race(service, labels, "ar", settings(spread), seed, race, measured, probes)
    assert isinstance(done, PredictRace)
    return done, objective, service, forecast


@pytest.mark.parametrize(("probed", "most"), [(True, 3), (False, 4)])
def test_it_finds_the_best_with_a_fraction_of_the_starts(probed, most):
    """Probes of the running baseline pin the verify cost: the baseline and the predicted
    winner, confirmed; without them the fewest and most verify tokens pin it first."""
    for seed in range(3):
        race, objective, service, forecast = run(seed, probed=probed)
        best = max(objective, key=objective.__getitem__)
        verdict = race.verdict(forecast.cost)
        assert verdict.status in ("separated", "equivalent")
        members = [verdict.label, *verdict.equivalent]
        assert all(objective[m] * 1.03 >= objective[best] for m in members)
        assert race.fallback is None and not race.missed
        assert service.starts <= most  # a restart-bound race starts all 11 first
        assert race.pass_no == 1  # confirmed by the prediction: no second pass
        reasons = {e.reason for e in race.eliminated.values()}
        assert {"dominated", "predicted"} <= reasons
        assert all(f"b{b} k8" in race.eliminated for b in BUDGETS)  # topk 8: never faster


def test_a_trace_that_misses_the_measured_acceptance_is_corrected_not_dropped():
    race, objective, service, forecast = run(0, tau_factor=0.9)
    assert race.fallback is None and race.missed  # a miss, and the forecast kept
    assert any("acceptance" in why for why in race.missed.values())
    assert any(e.reason == "predicted" for e in race.eliminated.values())
    assert service.starts <= 5  # a start or two more than when exact: never every config
    verdict = race.verdict(forecast.cost)
    best = max(objective, key=objective.__getitem__)
    assert verdict.label is not None and objective[verdict.label] * 1.03 >= objective[best]


def test_the_cost_model_takes_the_start_spread_the_race_estimates():
    """Told that a start moves a config by 12% (`[sweep] start_spread`), the race's cost model
    predicts what a new start measures with the race's own estimate of that spread: the
    stated 12%, moved by its second starts (this production world's starts are 1.5% apart:
    9-10% after them), never the 3% prior. It still finds the best config, at the price of a
    start or two more (4-5 against 2), never every config (11)."""
    plain, _, _, _ = run(0)
    race, objective, service, forecast = run(0, spread=0.12)
    assert plain.model is not None and race.model is not None and race.components is not None
    assert plain.model.noise_sd() < 0.05
    start = race.components.start
    assert start.df > 4.0  # second starts counted beside the prior's 4 df
    assert 0.08 < math.sqrt(start.var) < 0.12  # moved from 12% towards the 1.5% measured
    assert race.model.noise_sd() >= math.sqrt(start.var)
    verdict = race.verdict(forecast.cost)
    best = max(objective, key=objective.__getitem__)
    assert verdict.status == "separated" and verdict.label is not None
    assert objective[verdict.label] * 1.03 >= objective[best]
    assert service.starts <= 6


def test_a_resumed_race_decides_as_the_uninterrupted_one():
    race, _, _, forecast = run(1)
    again = PredictRace(race.contenders, "ar", settings(), 1, forecast=forecast)
    for result in race.seen:
        again.add(result)
    assert again.alive == race.alive and again.eliminated == race.eliminated
    assert again.next() == race.next()


def test_other_weights_fall_back_at_once():
    _, _, _, forecast = run(0)
    race = PredictRace(("ar", "b4 k4", "b8 k4"), "ar", settings(), 0, forecast=forecast)
    step = race.next()
    assert step is not None
    race.add(FinishedBench(step.label, step.start, step.bench, 40.0, unpredicted="other target"))
    assert race.fallback == f"{step.label}: other target"
    assert not race.left_out or all(x in race.alive for x in race.left_out)


def _awaiting_run(seed: int, forecast_comes: bool):
    """`run`, but the forecast arrives with the baseline's first bench (n-gram: its answers)."""
    shapes, objective, forecast, service = _world(seed)
    labels = list(objective)
    race = PredictRace(tuple(labels), "ar", settings(), seed, awaiting=True)
    assert race.queue == ["ar"] and race.next().label == "ar"
    add = race.add

    def with_forecast(result: FinishedBench) -> None:
        if result.label == "ar" and result.start == result.bench == 1 and forecast_comes:
            result = replace(result, forecast=forecast)
        add(result)

    race.add = with_forecast  # type: ignore[method-assign]
    measured = {x: {w: s.acceptance or 1.0 for w, s in by.items()} for x, by in shapes.items()}
    done = run_start_race(service, labels, "ar", settings(), seed, race, measured, forward)
    assert isinstance(done, PredictRace)
    return done, objective, service, forecast


def test_a_forecast_that_comes_with_the_baseline_decides_as_one_given_up_front():
    race, objective, service, forecast = _awaiting_run(0, forecast_comes=True)
    ahead, _, ahead_service, _ = run(0)
    assert race.forecast is forecast and race.fallback is None
    assert race.eliminated == ahead.eliminated and service.starts == ahead_service.starts
    assert race.verdict(forecast.cost) == ahead.verdict(forecast.cost)


def test_a_baseline_without_token_paths_races_every_config_and_says_why():
    race, _, service, _ = _awaiting_run(0, forecast_comes=False)
    assert race.forecast is None and "recorded no token paths" in (race.fallback or "")
    assert all(e.starts >= 1 for e in race.efforts.values())  # pass 1 starts every config
    assert service.starts >= len(race.contenders)


# --- chains: the largest num_steps's counts predict every smaller one ------------------

SHARES = (0.9, 0.85, 0.3, 0.2, 0.1)  # rounds accepted at draft position i, of all rounds


def chain_params(k: int) -> DecodeParams:
    return DecodeParams.from_wire({"method": "eagle3", "method_knobs": {"num_steps": k}})


def _chain_run(seed: int):
    """ar + EAGLE-3 at K = 1..5: K2 fastest, K3 4% behind; ar's answers and K5's counts predict."""
    taus = {f"K{k}": 1 + sum(SHARES[:k]) for k in range(1, 6)}
    step_s = {f"K{k}": forward(k + 1) + 0.15 * STEP * k for k in range(1, 6)}  # + K head steps
    tps = {"ar": dict.fromkeys(WORKLOADS, 1 / STEP)}
    tps |= {x: dict.fromkeys(WORKLOADS, taus[x] / step_s[x]) for x in taus}
    objective, service = _service(tps, seed)
    configs = {"ar": DecodeParams("ar"), **{f"K{k}": chain_params(k) for k in range(1, 6)}}
    cost = config_cost(configs)
    ar_shape = {w: Shape("ar", 1.0, 1, 0.0, None) for w in WORKLOADS}
    answers = Forecast({"ar": ar_shape}, {"ar": None}, cost, source="the baseline's answers")
    counts = ChainCounts(1000, tuple(round(1000 * s) for s in SHARES))
    chain = chains_forecast(configs, {"K5": ChainRun(counts, dict.fromkeys(WORKLOADS, taus["K5"]))})
    race = PredictRace(tuple(configs), "ar", settings(), seed, awaiting=True, anchors=("K5",))
    add, queues = race.add, []

    def with_forecast(result: FinishedBench) -> None:
        if result.start == result.bench == 1 and result.label in ("ar", "K5"):
            result = replace(result, forecast=answers if result.label == "ar" else chain)
        add(result)
        queues.append(list(race.queue))

    race.add = with_forecast  # type: ignore[method-assign]
    measured = {x: dict.fromkeys(WORKLOADS, t) for x, t in {"ar": 1.0, **taus}.items()}
    done = run_start_race(service, list(configs), "ar", settings(), seed, race, measured, forward)
    assert isinstance(done, PredictRace)
    return done, objective, service, queues


def test_a_chains_largest_k_starts_after_the_baseline_and_predicts_the_rest():
    for seed in range(3):
        race, objective, service, queues = _chain_run(seed)
        assert queues[0][:1] == ["K5"]  # the baseline's bench in: the anchor next
        assert race.forecast is not None and set(race.forecast.shapes) == set(objective)
        assert "counts" in race.forecast.source and "answers" in race.forecast.source
        verdict = race.verdict(race.forecast.cost)
        assert verdict.status in ("separated", "equivalent")
        best = max(objective, key=objective.__getitem__)
        members = [verdict.label, *verdict.equivalent]
        assert all(objective[m] * 1.03 >= objective[best] for m in members)
        assert service.starts <= 4  # the baseline, K5, the predicted winner (and one more)
        assert any(e.reason == "predicted" for e in race.eliminated.values())


def test_a_drafter_window_not_measured_is_not_judged_by_the_prior():
    """The window-64 configs attend 64 positions on both workloads (prompts are longer):
    their starts cannot tell what the drafter costs a position from what the method costs a
    round, so the window-none configs (100 and 300 positions, 2% more tokens a round, the
    drafter free on this service) are not predicted out before one of them ran (judged by
    the prior, a window-none config stays below the 3% a dearer config must beat the leader
    by, and none starts); once one did, the rest are judged by it."""
    shapes = {"ar": {w: Shape("ar", 1.0, 1, 0.0, 1.0) for w in WORKLOADS}}
    tps = {"ar": {w: 1 / STEP for w in WORKLOADS}}
    positions = {"short": 100.0, "long": 300.0}
    for b in (4, 8, 16):
        for window in (64, None):
            label, r = f"b{b} w{window or 'none'}", tokens(b, 4) * (1.0 if window else 1.02)
            seen = {w: 64.0 if window else positions[w] for w in WORKLOADS}
            shapes[label] = {
                w: Shape("ddtree", r, b + 1, seen[w] / positions[w], r, drafter_positions=seen[w])
                for w in WORKLOADS
            }
            tps[label] = {w: r / seconds(b) for w in WORKLOADS}  # the drafter: free here
    for seed in range(3):
        objective, service = _service(tps, seed)
        labels = list(objective)
        cost = lambda x: (x != "ar", int(x[1:].split()[0]) if x != "ar" else 0, x)  # noqa: E731
        forecast = Forecast(shapes, {x: s["short"].acceptance for x, s in shapes.items()}, cost)
        race = PredictRace(tuple(labels), "ar", settings(), seed, forecast=forecast)
        measured = {x: {w: s.acceptance or 1.0 for w, s in by.items()} for x, by in shapes.items()}
        run_start_race(service, labels, "ar", settings(), seed, race, measured, forward)
        wide = [x for x in labels if x.endswith("wnone")]
        started = [x for x in wide if race.efforts[x].starts]
        assert started  # one window-none config ran
        assert any(x in race.eliminated for x in wide if x not in started)  # the rest judged


# --- the baseline's start from an earlier sweep (rule 6) --------------------------------


def _slow_world(seed: int):  # noqa: ANN202
    """`landscape` on a service where every DDTree round costs 2.5x what its forwards say
    (a drafter that does not pay): plain decoding is the answer, and, as on vLLM, it reports
    no acceptance, so only a second start of it confirms it."""
    shapes, tps = landscape()
    tps = {x: {w: v / (1 if x == "ar" else 2.5) for w, v in t.items()} for x, t in tps.items()}
    objective, service = _service(tps, seed)
    cost = lambda x: (x != "ar", int(x[1:].split()[0]) if x != "ar" else 0, x)  # noqa: E731
    forecast = Forecast(shapes, {x: s["short"].acceptance for x, s in shapes.items()}, cost)
    measured = {x: {w: s.acceptance or 1.0 for w, s in by.items()} for x, by in shapes.items()}
    return objective, service, forecast, measured | {"ar": {}}


def _slow_run(seed: int, earlier: tuple[FinishedBench, ...] = (), capped: int | None = None):  # noqa: ANN202
    objective, service, forecast, measured = _slow_world(seed)
    labels = list(objective)
    rules = replace(settings(), max_trials=capped)
    race = PredictRace(tuple(labels), "ar", rules, seed, forecast=forecast, earlier=earlier)
    seen: list[FinishedBench] = []
    add = race.add
    race.add = lambda result: (seen.append(result), add(result))[1]  # type: ignore[method-assign]
    first = race.next()
    run_start_race(service, labels, "ar", rules, seed, race, measured, forward)
    return race, service, first, seen


def test_the_baselines_start_from_an_earlier_sweep_saves_its_first_start():
    """Where plain decoding wins, a predicting race starts it, the predicted winner, and it
    again (a leader needs two starts). Given its start from an earlier sweep of the same
    service (its benches and forwards, hours before), the race starts the predicted winner
    first and plain decoding once: one start fewer, the same answer; a resumed race decides
    as the uninterrupted one; and a cap reached first still leaves the baseline its own start
    (the report compares with it)."""
    for seed in range(3):
        plain, plain_service, first, seen = _slow_run(seed)
        assert first is not None and first.label == "ar"
        assert plain.verdict(plain.forecast.cost).label == "ar"
        earlier = tuple(
            replace(r, hours=r.hours - 5.0) for r in seen if r.label == "ar" and r.start == 1
        )
        assert earlier[0].probes  # its first bench timed the forwards
        race, service, first, seen = _slow_run(seed, earlier)
        assert first is not None and first.label != "ar"  # no start of the baseline first
        assert race.efforts["ar"].starts >= 2 and race.trials_done == len(seen)
        assert race.verdict(race.forecast.cost).label == "ar"
        assert service.starts <= plain_service.starts - 1
        again = PredictRace(
            race.contenders, "ar", settings(), seed, forecast=race.forecast, earlier=earlier
        )
        for result in seen:
            again.add(result)
        assert again.eliminated == race.eliminated and again.stop == race.stop
        capped, _, _, _ = _slow_run(seed, earlier, capped=2)  # one start's benches at most
        assert capped.stop is not None and capped.trials_done > 2  # past the cap, for:
        assert capped.efforts["ar"].starts == 2  # the baseline's own start


def test_the_baseline_reused_still_gets_a_start_of_its_own_before_the_race_stops():
    """Where a DDTree config beats plain decoding by far, the earlier start of plain decoding
    alone never decides against it: the race starts it once before it stops (the report and
    the restore measure the service as it is now), right after pass 1's configs, as many
    starts in all as without the earlier start (the winner, then the baseline)."""
    for seed in range(3):
        race, objective, plain_service, forecast = run(seed)
        earlier = tuple(
            replace(r, hours=r.hours - 5.0) for r in race.seen if r.label == "ar" and r.start == 1
        )
        _, objective, forecast, service = _world(seed)
        labels = list(objective)
        reusing = PredictRace(
            tuple(labels), "ar", settings(), seed, forecast=forecast, earlier=earlier
        )
        shapes, _ = landscape()
        measured = {x: {w: s.acceptance or 1.0 for w, s in by.items()} for x, by in shapes.items()}
        run_start_race(service, labels, "ar", settings(), seed, reusing, measured, forward)
        assert reusing.efforts["ar"].starts == 2  # the earlier one and its own
        assert reusing.last_start["ar"] == reusing.starts_done  # its own came last
        assert service.starts <= plain_service.starts  # not a start more
        verdict = reusing.verdict(forecast.cost)
        best = max(objective, key=objective.__getitem__)
        assert verdict.label is not None and objective[verdict.label] * 1.03 >= objective[best]
