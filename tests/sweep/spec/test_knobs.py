"""The DDTree knobs in a sweep spec: sweepable where the engine honours them (SGLang's
environment), refused with one clear line where it cannot (ddtune's own engine has no such
knob), for modes that have no tree, and where no placeholder would carry them."""

from __future__ import annotations

import textwrap

import pytest

from ddtune.errors import UserError
from ddtune.sweep.plan import parse_spec

SGLANG_SERVICE = """
[service]
engine = "sglang"
command = ["python", "-m", "ddtune.launchers", "sglang", "--model-path", "/m",
           "--draft-model-path", "/d", "--mode", "{mode}", "--budget", "{budget}",
           "--topk", "{topk}", "--window", "{window}", "--depth-bonus", "{depth_bonus}",
           "--rank-probe", "{rank_probe}", "--port", "{port}"]
"""
DDTUNE_SERVICE = """
[service]
command = ["python", "-m", "ddtune.cli", "serve", "--port", "{port}", "--mode", "{mode}"]
"""


def spec(body: str, service: str = SGLANG_SERVICE):
    text = '[sweep]\nname = "k"\nbaseline = { mode = "ar" }\n' + textwrap.dedent(body) + service
    return parse_spec(text, source="k.toml")


def error(body: str, service: str = SGLANG_SERVICE) -> UserError:
    with pytest.raises(UserError) as info:
        spec(body, service)
    return info.value


def test_the_grid_sweeps_knobs_for_ddtree_configs():
    parsed = spec("""
        [space]
        mode = ["ddtree"]
        budget = [8]
        depth_bonus = [0, 0.2, -0.5]
        rank_probe = [false, true]
    """)
    labels = [c.label() for c in parsed.configs]
    assert len(labels) == 6 and "ddtree b8 k4 wnone bonus-0.5 probe" in labels

    def bonus(params):
        argv = parsed.service.render_argv(params)
        return argv[argv.index("--depth-bonus") + 1]

    assert bonus(parsed.configs[0].params) == "0.0"
    assert bonus(parsed.baseline.params) == "default"  # ar: no knob, SGLang's default


def test_a_kind_that_cannot_honour_a_knob_refuses_it_naming_the_key_and_line():
    failure = error('[space]\nmode = ["ddtree"]\ndepth_bonus = [0.1, 0.3]\n', DDTUNE_SERVICE)
    assert failure.key == "space.depth_bonus"
    assert str(failure) == (
        "k.toml:6: space.depth_bonus is a DDTree knob that engine 'ddtune' cannot honour "
        "(only 'sglang' reads it); remove it or set service.engine"
    )


def test_a_knob_on_a_mode_without_a_tree_is_refused():
    failure = error('[[configs]]\nmode = "dflash"\nrank_probe = true\n')
    assert failure.key == "configs.0.rank_probe"
    assert "applies to mode 'ddtree' only" in str(failure)


def test_a_knob_no_placeholder_carries_would_be_ignored_so_it_is_refused():
    service = SGLANG_SERVICE.replace('"--rank-probe", "{rank_probe}", ', "")
    failure = error('[space]\nmode = ["ddtree"]\nrank_probe = [false, true]\n', service)
    assert failure.key == "space.rank_probe" and "add a {rank_probe} placeholder" in str(failure)


def test_a_knob_value_of_the_wrong_type_names_its_key():
    failure = error('[space]\nmode = ["ddtree"]\ndepth_bonus = [0.1, "wide"]\n')
    assert failure.key == "space.depth_bonus"


def test_a_search_space_draws_knobs_for_ddtree_and_covers_them():
    text = textwrap.dedent("""
        [sweep]
        name = "k"
        strategy = "optuna"
        [optuna]
        n_trials = 4
        [space]
        mode = ["ar", "ddtree"]
        budget = { low = 2, high = 16 }
        depth_bonus = [0.0, 0.5]
        """)
    parsed = parse_spec(text + SGLANG_SERVICE, source="k.toml")
    assert parsed.search is not None
    assert parsed.search.size() == 1 + 15 * 2
    covering = {p.label() for p, _ in parsed.search.covering()}
    assert covering == {
        "ar",
        "ddtree b2 k4 wnone bonus0",
        "ddtree b16 k4 wnone bonus0",
        "ddtree b2 k4 wnone bonus0.5",
    }
