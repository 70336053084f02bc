"""Blocked comparisons and the separated / equivalent / inconclusive verdict."""

from __future__ import annotations

import math

import pytest

from ddtune.stats.blocked import (
    BlockedOptions,
    compare,
    config_effects,
    decide,
    geometric_mean,
    leader_of,
)

DRIFT = [1.00, 1.10, 0.92, 1.05, 0.97]  # a machine state shared by every config in a pass


def _passes(rate: float, jitter: list[float] | None = None) -> dict[int, float]:
    jitter = jitter or [0.0] * len(DRIFT)
    return {
        p + 1: rate * d * math.exp(j) for p, (d, j) in enumerate(zip(DRIFT, jitter, strict=True))
    }


NOISE_A = [0.004, -0.003, 0.002, -0.004, 0.001]
NOISE_B = [-0.002, 0.003, -0.001, 0.002, -0.003]


def test_paired_removes_the_shared_drift_welch_does_not():
    a, b = _passes(104, NOISE_A), _passes(100, NOISE_B)
    paired = compare(a, b, BlockedOptions())
    welch = compare(a, b, BlockedOptions(blocked=False))
    assert paired.method == "paired" and welch.method == "welch"
    assert paired.separated and paired.ratio == pytest.approx(1.04, abs=0.005)
    assert not welch.separated


def test_compare_pairs_only_shared_passes_and_falls_back_to_welch():
    a, b = _passes(104, NOISE_A), _passes(100, NOISE_B)
    del b[3]  # a failed trial: pass 3 drops out of the pairs
    assert compare(a, b, BlockedOptions()).n == 4
    two = {1: 100.0, 2: 101.0}
    other = {3: 100.0, 4: 99.0}
    assert compare(two, other, BlockedOptions()).method == "welch"  # no pass in common
    with pytest.raises(ValueError):
        compare({}, other, BlockedOptions())


def _cost(label: str) -> tuple[int, str]:
    return (len(label), label)  # shorter label = cheaper


def test_separated_when_the_leader_beats_everyone():
    samples = {"big": _passes(110, NOISE_A), "mid": _passes(100, NOISE_B), "low": _passes(80)}
    verdict = decide(samples, _cost)
    assert verdict.status == "separated" and verdict.label == "big" == verdict.leader
    assert sorted(verdict.separated) == ["low", "mid"] and not verdict.contenders
    assert verdict.method == "paired"


def test_equivalent_recommends_the_cheapest_within_tolerance():
    samples = {
        "expensive": _passes(100, NOISE_A),
        "cheap": _passes(100.5, NOISE_B),  # leader by 0.5%, well inside 3%
        "slow": _passes(80),
    }
    verdict = decide(samples, lambda s: {"cheap": 2, "expensive": 1, "slow": 0}[s])
    assert verdict.leader == "cheap"
    assert verdict.status == "equivalent" and verdict.equivalent == ["expensive"]
    assert verdict.label == "expensive"  # cost 1 < 2: cheaper of the equivalence set
    assert verdict.equivalence["expensive"].equivalent
    assert verdict.separated == ["slow"]


def test_inconclusive_names_the_nearest_and_the_passes_needed():
    noisy_a = [0.03, -0.04, 0.05, -0.02, 0.01]
    noisy_b = [-0.02, 0.05, -0.03, 0.04, -0.01]
    samples = {"a": _passes(102, noisy_a), "b": _passes(100, noisy_b), "c": _passes(70)}
    verdict = decide(samples, _cost)
    assert verdict.status == "inconclusive" and verdict.contenders == ["b"]
    assert verdict.nearest == "b" and verdict.label == "a"
    assert verdict.required_passes is not None and verdict.required_passes > 5


def test_lower_is_better_objective():
    samples = {"fast": _passes(0.10, NOISE_A), "slow": _passes(0.13, NOISE_B)}
    verdict = decide(samples, _cost, BlockedOptions(maximize=False))
    assert verdict.status == "separated" and verdict.label == "fast"
    assert leader_of(samples, maximize=False) == "fast"


def test_no_data_and_geometric_mean():
    assert decide({"a": {}}, _cost).status == "no data"
    assert geometric_mean({1: 2.0, 2: 8.0}) == pytest.approx(4.0)
    single = decide({"only": {1: 5.0}}, _cost)
    assert single.status == "separated" and single.label == "only"


def test_config_effects_ignore_the_machine_state_of_a_missed_pass():
    fast = _passes(100)
    slow = _passes(98)
    del fast[2]  # pass 2 ran at +10%: without it the raw geometric mean of `fast` drops
    assert geometric_mean(fast) < geometric_mean(slow)
    effects = config_effects({"fast": fast, "slow": slow})
    assert effects["fast"] - effects["slow"] == pytest.approx(math.log(100 / 98))
    assert leader_of({"fast": fast, "slow": slow}) == "fast"
    assert leader_of({"fast": fast, "slow": slow}, blocked=False) == "slow"
