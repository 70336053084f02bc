"""Trial ordering: sequential, interleaved, random (seeded)."""

from __future__ import annotations

import pytest

from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.sweep.plan.trial_order import plan_trials
from ddtune.sweep.spec.parse import Config

BASE = (Config(DecodeParams("ar").canonical()), True)
A = (Config(DecodeParams("ddtree", 4, 2)), False)
B = (Config(DecodeParams("ddtree", 8, 2)), False)


def _pairs(trials):
    return [(t.config.params.label(), t.repeat) for t in trials]


def test_sequential_is_config_major():
    trials = plan_trials([BASE, A, B], repeats=2, order="sequential")
    assert _pairs(trials) == [
        ("ar", 1),
        ("ar", 2),
        ("ddtree b4 k2 wnone", 1),
        ("ddtree b4 k2 wnone", 2),
        ("ddtree b8 k2 wnone", 1),
        ("ddtree b8 k2 wnone", 2),
    ]
    assert [t.order_index for t in trials] == list(range(6))
    assert [t.is_baseline for t in trials] == [True, True, False, False, False, False]


def test_interleaved_runs_every_config_once_per_pass_in_a_seeded_shuffle():
    configs = [BASE, A, B] + [(Config(DecodeParams("ddtree", 16, k)), False) for k in (2, 4, 8)]
    trials = plan_trials(configs, repeats=3, order="interleaved", seed=1)
    assert [t.repeat for t in trials] == [1] * 6 + [2] * 6 + [3] * 6
    labels = sorted(c.label() for c, _ in configs)
    orders = [[t.config.label() for t in trials if t.repeat == r] for r in (1, 2, 3)]
    assert all(sorted(o) == labels for o in orders)  # each pass: every config, the baseline too
    assert len({tuple(o) for o in orders}) == 3  # each pass shuffled on its own
    assert _pairs(trials) == _pairs(plan_trials(configs, 3, "interleaved", seed=1))
    assert _pairs(trials) != _pairs(plan_trials(configs, 3, "interleaved", seed=2))
    assert [t.order_index for t in trials] == list(range(18))


def test_passes_per_start_keep_a_config_on_one_start():
    trials = plan_trials([BASE, A, B], repeats=4, order="interleaved", passes_per_start=2)
    block_1 = [(t.config.label(), t.repeat) for t in trials[:6]]
    assert [r for _, r in block_1] == [1, 2, 1, 2, 1, 2]
    assert block_1[0][0] == block_1[1][0] and block_1[2][0] == block_1[3][0]
    assert {t.repeat for t in trials[6:]} == {3, 4}


def test_random_is_a_seeded_permutation():
    first = plan_trials([BASE, A, B], repeats=4, order="random", seed=7)
    again = plan_trials([BASE, A, B], repeats=4, order="random", seed=7)
    other = plan_trials([BASE, A, B], repeats=4, order="random", seed=8)
    interleaved = plan_trials([BASE, A, B], repeats=4, order="interleaved")
    assert _pairs(first) == _pairs(again)
    assert _pairs(first) != _pairs(other)
    assert sorted(_pairs(first)) == sorted(_pairs(interleaved))  # same trials, other order
    assert len(set(_pairs(first))) == 12


def test_unknown_order_is_a_user_error():
    with pytest.raises(UserError, match="order must be one of"):
        plan_trials([A], repeats=1, order="zigzag")
