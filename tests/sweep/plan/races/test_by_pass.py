"""Race decisions: eliminations with reasons, stop rules, replay determinism, block order."""

from __future__ import annotations

import math
import random

import pytest

from ddtune.sweep.plan.races.by_pass import PassResult, RaceSettings, replay
from ddtune.sweep.plan.trial_order import block_order

CONFIGS = ["base", "a", "b", "c", "d"]


def _make_passes(
    rates: dict[str, float], n: int, seed: int = 0, sd: float = 0.01, seconds: float = 60.0
) -> list[PassResult]:
    """n passes of every config: shared drift per pass plus small per-trial noise."""
    rng = random.Random(seed)
    passes = []
    for _ in range(n):
        drift = math.exp(rng.gauss(0, 0.08))
        values = {c: r * drift * math.exp(rng.gauss(0, sd)) for c, r in rates.items()}
        passes.append(PassResult(values, seconds=seconds * len(values)))
    return passes


def _race(rates, passes, **settings):
    return replay(list(rates), "base", passes, RaceSettings(**settings))


RATES = {"base": 50.0, "a": 100.0, "b": 90.0, "c": 99.0, "d": 60.0}


def test_no_decision_before_min_passes():
    state = _race(RATES, _make_passes(RATES, 2))
    assert state.alive == CONFIGS and not state.eliminated and state.stop is None
    assert state.leader is None and [s.pass_no for s in state.history] == [1, 2]
    assert state.scheduled() == CONFIGS and state.trials_done == 10


def test_clearly_worse_configs_leave_with_a_reason():
    state = _race(RATES, _make_passes(RATES, 3))
    assert state.leader in ("a", "c") and state.alive == ["a", "c"]  # 1% apart: not separated yet
    assert set(state.eliminated) == {"base", "b", "d"}
    out = state.eliminated["b"]
    assert out.at_pass == 3 and out.reason == "worse" and out.p_value < 0.05
    assert f"{state.leader} / b" in out.detail and "Holm p" in out.detail
    assert "(paired, 3 passes)" in out.detail
    assert state.history[-1].eliminated and state.history[-1].leader == state.leader


def test_baseline_stays_in_every_pass_after_leaving_the_race():
    state = _race(RATES, _make_passes(RATES, 3))
    assert "base" in state.eliminated
    assert state.scheduled() == ["base", "a", "c"]


def test_race_stops_when_one_is_left():
    rates = {"base": 50.0, "a": 100.0, "b": 80.0}
    state = _race(rates, _make_passes(rates, 3))
    assert state.alive == ["a"] and state.stop == "one_left" and state.scheduled() == []


def test_race_stops_when_the_rest_are_equivalent():
    rates = {"base": 50.0, "a": 100.0, "c": 100.2}
    state = _race(rates, _make_passes(rates, 3, sd=0.002), max_passes=10)
    assert state.stop == "equivalent" and set(state.alive) == {"a", "c"}
    assert state.scheduled() == []


def test_max_passes_trials_and_hours():
    rates = {"base": 50.0, "a": 100.0, "c": 99.0}
    passes = _make_passes(rates, 4, sd=0.05)
    assert _race(rates, passes, max_passes=4).stop == "max_passes"
    assert _race(rates, passes[:3], max_passes=9, max_trials=11).stop == "max_trials"
    # 9 trials x 60 s done; the next pass (3 trials) would end at 12 min > 0.19 h
    assert _race(rates, passes[:3], max_passes=9, max_hours=0.19).stop == "max_hours"
    assert _race(rates, passes[:3], max_passes=9, max_hours=0.21).stop is None


def test_budget_stops_wait_for_the_first_passes_planned_together():
    """A budget already spent in pass 1 stops the race after min_passes, not before:
    those passes were planned together and ran, so replaying them must not fail."""
    rates = {"base": 50.0, "a": 100.0, "c": 99.0}
    passes = _make_passes(rates, 3, sd=0.05, seconds=600.0)  # 30 min per pass
    for n in (1, 2):
        assert _race(rates, passes[:n], min_passes=3, max_hours=0.1).stop is None
    state = _race(rates, passes, min_passes=3, max_hours=0.1)
    assert state.stop == "max_hours" and state.passes_done == 3


def test_failed_trials_never_count_and_a_failing_config_leaves():
    passes = _make_passes(RATES, 3)
    broken = [PassResult({**p.values, "d": None}, seconds=p.seconds) for p in passes]
    broken[0] = PassResult({**broken[0].values, "a": None})
    state = _race(RATES, broken)
    assert state.eliminated["d"].reason == "failed"
    assert state.eliminated["d"].detail == "0 completed trial(s)"
    assert "a" in state.alive  # two completed trials are enough to stay in
    assert state.leader in ("a", "c") and state.trials_done == 15  # failed trials are trials


def test_pass_rate_elimination_uses_fisher():
    rates = {"base": 50.0, "a": 100.0, "fast_wrong": 101.0}
    passes = []
    for p in _make_passes(rates, 3, sd=0.05):
        coding = {"base": (10, 10), "a": (10, 10), "fast_wrong": (2, 10)}
        passes.append(PassResult(p.values, coding))
    state = _race(rates, passes)
    out = state.eliminated["fast_wrong"]
    assert out.reason == "pass_rate" and "6/30 vs 30/30" in out.detail and "Fisher" in out.detail


def test_replay_is_deterministic_and_prefix_consistent():
    """A resumed race (replay of the stored passes) decides exactly as the uninterrupted one."""
    rates = {"base": 50.0, "a": 100.0, "b": 97.0, "c": 98.5, "d": 90.0}
    settings = RaceSettings(min_passes=3, max_passes=12)
    passes: list[PassResult] = []
    rng = random.Random(3)
    state = replay(list(rates), "base", passes, settings)
    while state.stop is None:  # a pass runs only the scheduled configs
        drift = math.exp(rng.gauss(0, 0.05))
        values = {c: rates[c] * drift * math.exp(rng.gauss(0, 0.01)) for c in state.scheduled()}
        passes.append(PassResult(values))
        state = replay(list(rates), "base", passes, settings)
    again = replay(list(rates), "base", list(passes), settings)
    assert again.history == state.history and again.eliminated == state.eliminated
    for k in range(len(passes)):  # every intermediate state agrees with the full history
        partial = replay(list(rates), "base", passes[:k], settings)
        assert partial.history == state.history[:k]
    assert state.stop is not None and state.leader == "a"


def test_a_pass_after_the_stop_is_an_error():
    rates = {"base": 50.0, "a": 100.0, "b": 80.0}
    with pytest.raises(ValueError, match="after the race stopped"):
        _race(rates, _make_passes(rates, 4))


def test_settings_and_baseline_are_checked():
    with pytest.raises(ValueError):
        RaceSettings(min_passes=1)
    with pytest.raises(ValueError):
        RaceSettings(min_passes=5, max_passes=4)
    with pytest.raises(ValueError):
        RaceSettings(tolerance=0)
    with pytest.raises(ValueError, match="baseline"):
        replay(["a", "b"], "zz", [], RaceSettings())


def test_block_order_is_a_seeded_shuffle_per_pass():
    labels = [f"c{i}" for i in range(12)]
    first = block_order(labels, seed=0, pass_no=1)
    assert sorted(first) == sorted(labels)
    assert first == block_order(labels, seed=0, pass_no=1)
    assert first != block_order(labels, seed=0, pass_no=2)
    assert first != block_order(labels, seed=1, pass_no=1)
