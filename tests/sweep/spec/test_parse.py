"""Sweep spec parsing: grid expansion, canonicalisation, and errors that name key and line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.sweep.plan import parse_spec, read_spec
from ddtune.sweep.plan.prepare import plan_spec
from ddtune.sweep.spec.parse import Config

SERVICE = """
[service]
command = ["python", "-m", "ddtune.cli", "serve", "--port", "{port}", "--budget", "{budget}"]
port = 18000
"""

GOOD = (
    textwrap.dedent("""
    [sweep]
    name = "grid"
    repeats = 3
    order = "random"
    seed = 5
    baseline = { mode = "ar" }

    [space]
    mode = ["ddtree"]
    budget = [4, 8]
    topk = [2, 4]
    window = [64, "none"]
    """)
    + SERVICE
    + textwrap.dedent("""
    [bench]
    temperature = 0
    [bench.short]
    max_tokens = 8

    [retry]
    attempts = 3
    backoff = 0.5
    """)
)


def _spec(body: str, service: bool = True):
    return parse_spec(textwrap.dedent(body) + (SERVICE if service else ""), source="t.toml")


def test_grid_is_the_cartesian_product_plus_baseline():
    spec = parse_spec(GOOD, source="t.toml")
    assert (spec.name, spec.repeats, spec.order, spec.seed) == ("grid", 3, "random", 5)
    assert spec.baseline.params == DecodeParams("ar").canonical()
    assert len(spec.configs) == 8
    assert {c.params.window for c in spec.configs} == {64, None}
    assert spec.configs[0].params == DecodeParams("ddtree", 4, 2, 64)
    assert (spec.retry.attempts, spec.retry.backoff) == (3, 0.5)
    assert spec.bench.short.max_tokens == 8
    assert spec.service.port == 18000
    assert spec.all_configs()[0] == (spec.baseline, True)


def test_configs_are_canonical_and_deduplicated():
    spec = _spec("""
        [sweep]
        name = "d"
        baseline = { mode = "ar" }
        [space]
        mode = ["ar", "dflash", "ddtree"]
        budget = [4, 8]
        topk = [2]
        [[configs]]
        mode = "ddtree"
        budget = 4
        topk = 2
        """)
    labels = [c.label() for c in spec.configs]
    # ar × budgets collapses into the baseline; dflash ignores budget; the explicit one is a duplicate
    assert labels == ["dflash wnone", "ddtree b4 k2 wnone", "ddtree b8 k2 wnone"]


def test_explicit_configs_with_user_vars():
    spec = _spec(
        """
        [sweep]
        name = "v"
        [[configs]]
        mode = "ddtree"
        budget = 8
        vars = { mem = 0.8 }
        [[configs]]
        mode = "ddtree"
        budget = 8
        vars = { mem = 0.9 }
        [service]
        command = ["serve", "--mem", "{mem}"]
        vars = { mem = 0.5 }
        """,
        service=False,
    )
    assert [c.user_vars()["mem"] for c in spec.configs] == [0.8, 0.9]
    assert spec.configs[0].to_wire() == {
        "mode": "ddtree",
        "budget": 8,
        "topk": 4,
        "window": "none",
        "mem": 0.8,
    }
    assert spec.configs[0].label() == "ddtree b8 k4 wnone mem=0.8"
    assert spec.configs[0].hash() != spec.configs[1].hash()


def test_space_vars_multiply_the_grid():
    spec = _spec(
        """
        [sweep]
        name = "v"
        [space]
        budget = [4, 8]
        [space.vars]
        chunk = [1, 2, 3]
        [service]
        command = ["serve", "--chunk", "{chunk}"]
        vars = { chunk = 1 }
        """,
        service=False,
    )
    assert len(spec.configs) == 6
    assert {c.user_vars()["chunk"] for c in spec.configs} == {1, 2, 3}


def test_a_variable_no_placeholder_uses_is_refused():
    error = _error('[sweep]\nname = "x"\n[space]\nbudget = [4]\n[space.vars]\nchunk = [1, 2]\n')
    assert error.key == "space.vars"
    assert str(error).startswith("t.toml:5: space.vars: variable 'chunk' is not used")


def _error(body: str, service: bool = True) -> UserError:
    with pytest.raises(UserError) as info:
        _spec(body, service)
    return info.value


def test_unknown_key_names_key_and_line():
    error = _error("""
        [sweep]
        name = "x"

        [space]
        budget = [4]
        budgte = [8]
        """)
    assert error.key == "space.budgte"
    assert str(error) == (
        "t.toml:7: unknown key space.budgte; expected one of ar, budget, ddtree, depth_bonus, "
        "dflash, eagle, eagle3, method, mode, mtp, nextn, ngram, rank_probe, topk, vars, window"
    )


def test_unknown_top_level_table_and_sweep_key():
    error = _error('[sweep]\nname = "x"\n[spaec]\nbudget = [4]\n')
    assert (error.key, str(error).split(";")[0]) == ("spaec", "t.toml:3: unknown key spaec")
    error = _error('[sweep]\nname = "x"\nrepeat = 2\n')
    assert (
        error.key == "sweep.repeat"
        and "expected one of allow_indistinct_windows, baseline" in str(error)
    )
    assert str(error).startswith("t.toml:3: unknown key sweep.repeat")


def test_a_value_where_a_table_belongs_names_the_table_and_its_keys():
    error = _error('sweep = "x"\n')
    assert error.key == "sweep"
    assert str(error).startswith(
        "t.toml:1: sweep must be a table (its keys: allow_indistinct_windows,"
    )
    assert str(error).endswith("; got 'x'")


def test_unknown_keys_in_configs_and_baseline_list_the_allowed_ones():
    error = _error('[sweep]\nname = "x"\n[[configs]]\nbudget = 4\n[[configs]]\nbugdet = 4\n')
    assert error.key == "configs.1.bugdet"
    assert str(error) == (
        "t.toml:6: unknown key configs.1.bugdet; expected one of budget, depth_bonus, method, "
        "mode, rank_probe, topk, vars, window"
    )
    error = _error('[sweep]\nname = "x"\nbaseline = { mode = "ar", x = 1 }\n')
    assert error.key == "sweep.baseline.x" and str(error).startswith("t.toml:3: unknown key")


def test_wrong_type_names_key_and_line():
    error = _error('[sweep]\nname = "x"\nrepeats = "two"\n[space]\nbudget = [4]\n')
    assert (error.key, str(error)) == (
        "sweep.repeats",
        "t.toml:3: sweep.repeats: must be a valid integer; got 'two'",
    )


@pytest.mark.parametrize(
    ("space", "key", "message"),
    [
        ('window = [64, "wide"]', "space.window", "positive integer or 'none'; got 'wide'"),
        ("window = [0]", "space.window", "greater than or equal to 1; got 0"),
        ("budget = [4.5]", "space.budget", "must be a valid integer; got 4.5"),
        ('mode = ["tree"]', "space.mode", "must be 'ar', 'dflash' or 'ddtree'; got 'tree'"),
        ("budget = []", "space.budget", "is an empty list; give at least one value"),
    ],
)
def test_bad_grid_values_name_their_key(space: str, key: str, message: str):
    error = _error(f'[sweep]\nname = "x"\n[space]\n{space}\n')
    assert error.key == key
    assert str(error).startswith(f"t.toml:4: {key}") and message in str(error)


def test_bad_variables_name_their_key():
    error = _error('[sweep]\nname = "x"\n[[configs]]\nbudget = 4\nvars = { mode = 1 }\n')
    assert error.key == "configs.0.vars" and "'mode' must be an identifier other" in str(error)
    body = '[sweep]\nname = "x"\n[space]\nbudget = [4]\n[space.vars]\nchunk = [1, [2]]\n'
    error = _error(body)
    assert error.key == "space.vars.chunk.1"
    assert str(error).startswith("t.toml:6: space.vars.chunk.1: must be a string, number")


def test_bad_explicit_config_points_at_its_table():
    error = _error(
        '[sweep]\nname = "x"\n[[configs]]\nbudget = 4\n[[configs]]\nbudget = 4\ntopk = 0\n'
    )
    assert error.key == "configs.1.topk"
    assert str(error).startswith("t.toml:7: configs.1.topk: must be greater than or equal to 1")


def test_bad_baseline_order_and_retry():
    error = _error('[sweep]\nname = "x"\nbaseline = { mode = "fast" }\n[space]\nbudget=[4]\n')
    assert error.key == "sweep.baseline.mode" and str(error).startswith("t.toml:3:")
    error = _error('[sweep]\nname = "x"\norder = "zig"\n[space]\nbudget=[4]\n')
    assert str(error).startswith("t.toml:3: sweep.order: must be 'interleaved', 'random' or")
    error = _error('[sweep]\nname = "x"\n[space]\nbudget = [4]\n[retry]\nattempts = 0\n')
    assert error.key == "retry.attempts" and str(error).startswith("t.toml:6: retry.attempts")


def test_service_and_bench_errors_are_located():
    body = '[sweep]\nname = "x"\n[space]\nbudget = [4]\n[service]\ncommand = ["a"]\nprot = 1\n'
    error = _error(body, service=False)
    assert "prot" in str(error) and str(error).startswith("t.toml:")
    body = (
        '[sweep]\nname = "x"\n[space]\nbudget = [4]\n'
        + SERVICE
        + "[bench]\n[bench.short]\nmax_tokens = 0\n"
    )
    error = _error(body, service=False)
    assert error.key == "bench.short.max_tokens"
    assert str(error).startswith(f"t.toml:{body.count(chr(10))}: bench.short.max_tokens")


def test_a_service_error_is_placed_at_its_key(monkeypatch):
    """The [service] parser's `UserError.key` (a full path) decides the line."""
    from ddtune.services.spec import ServiceSpec

    def refuse(table):
        raise UserError("unknown key service.prot", key="service.prot")

    monkeypatch.setattr(ServiceSpec, "from_dict", refuse)
    body = '[sweep]\nname = "x"\n[space]\nbudget = [4]\n[service]\ncommand = ["a"]\nprot = 1\n'
    error = _error(body, service=False)
    assert (error.key, str(error)) == ("service.prot", "t.toml:7: unknown key service.prot")


def test_nothing_to_run_and_bad_toml():
    assert "t.toml: no configurations" in str(_error('[sweep]\nname = "x"\n'))
    assert "not valid TOML" in str(_error('[sweep\nname = "x"\n'))
    error = _error('[sweep]\nname = "a b/c"\n[space]\nbudget=[4]\n')
    assert error.key == "sweep.name" and "must be 1-64 letters" in str(error)
    assert _error("[space]\nbudget = [4]\n").key == "sweep"


def test_hash_ignores_comments_and_load_spec_resolves(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(GOOD)
    spec = read_spec(path)
    assert spec.hash == parse_spec("# a comment\n" + GOOD).hash
    assert spec.hash != parse_spec(GOOD.replace("seed = 5", "seed = 6")).hash
    assert spec.base_dir == str(tmp_path.resolve())
    with pytest.raises(UserError, match="cannot read sweep spec"):
        read_spec(tmp_path / "missing.toml")


def test_config_wire_round_trip_reads_old_stores():
    config = Config(DecodeParams("ddtree", 8, 2, 64), (("mem", 0.8),))
    assert Config.from_wire(config.to_wire()) == config
    old = {"mode": "dflash", "budget": 0, "topk": 1, "window": None}  # stores before "none"
    assert Config.from_wire(old) == Config(DecodeParams("dflash", 0, 1, None))


def test_shipped_demo_specs_plan_the_same_trials():
    """demo.toml: AR + 2 configs; demo-hot.toml: AR + a 2 budgets x 2 topk x 2 windows race."""
    examples = Path(__file__).resolve().parents[3] / "examples"
    grid = [(b, k, w) for b in (16, 64) for k in (4, 8) for w in (None, 64)]
    expected = {
        "demo.toml": [DecodeParams("ddtree", 16, 4, 64), DecodeParams("ddtree", 64, 8, None)],
        "demo-hot.toml": [DecodeParams("ddtree", *p) for p in grid],
    }
    for name, configs in expected.items():
        spec = read_spec(examples / name)
        trials = plan_spec(spec)
        every = [DecodeParams("ar").canonical(), *configs]
        assert [t.repeat for t in trials] == [r for r in (1, 2, 3) for _ in every]
        for r in (1, 2, 3):  # interleaved: every config once per pass, shuffled in the pass
            in_pass = [t for t in trials if t.repeat == r]
            assert sorted(map(str, (t.config.params for t in in_pass))) == sorted(map(str, every))
            assert [t.is_baseline for t in in_pass].count(True) == 1
        assert all(t.config.vars == () for t in trials)
