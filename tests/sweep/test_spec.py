"""Sweep spec parsing: grid expansion, canonicalisation, and errors that name key and line."""

from __future__ import annotations

import textwrap

import pytest

from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.sweep.spec import load_spec, parse_spec

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
    assert [c.to_dict()["mem"] for c in spec.configs] == [0.8, 0.9]
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
    assert {c.to_dict()["chunk"] for c in spec.configs} == {1, 2, 3}


def test_a_variable_no_placeholder_uses_is_refused():
    message = _error('[sweep]\nname = "x"\n[space]\nbudget = [4]\n[space.vars]\nchunk = [1, 2]\n')
    assert message.startswith("t.toml:5: [space]") and "'chunk' is not used" in message


def _error(body: str, service: bool = True) -> str:
    with pytest.raises(UserError) as info:
        _spec(body, service)
    return str(info.value)


def test_unknown_key_names_key_and_line():
    message = _error("""
        [sweep]
        name = "x"

        [space]
        budget = [4]
        budgte = [8]
        """)
    assert message.startswith("t.toml:7: [space] unknown key 'budgte'")
    assert "budget" in message  # the expected keys are listed


def test_unknown_top_level_table_and_sweep_key():
    assert _error('[sweep]\nname = "x"\n[spaec]\nbudget = [4]\n').startswith("t.toml:3:")
    assert "t.toml:3: [sweep] unknown key 'repeat'" in _error('[sweep]\nname = "x"\nrepeat = 2\n')


def test_wrong_type_names_key_and_line():
    message = _error('[sweep]\nname = "x"\nrepeats = "two"\n[space]\nbudget = [4]\n')
    assert message.startswith("t.toml:3: [sweep] 'repeats' must be int")


def test_bad_grid_values_name_their_key():
    assert _error('[sweep]\nname = "x"\n[space]\nwindow = [64, "wide"]\n').startswith(
        "t.toml:4: [space] window must be"
    )
    assert _error('[sweep]\nname = "x"\n[space]\nwindow = [0]\n').startswith(
        "t.toml:4: [space] window must be between"
    )
    assert "t.toml:4: [space] budget must be an integer" in _error(
        '[sweep]\nname = "x"\n[space]\nbudget = [4.5]\n'
    )
    assert "t.toml:4: [space] mode must be one of" in _error(
        '[sweep]\nname = "x"\n[space]\nmode = ["tree"]\n'
    )
    assert "empty list" in _error('[sweep]\nname = "x"\n[space]\nbudget = []\n')


def test_bad_explicit_config_points_at_its_table():
    message = _error(
        '[sweep]\nname = "x"\n[[configs]]\nbudget = 4\n[[configs]]\nbudget = 4\ntopk = 0\n'
    )
    assert message.startswith("t.toml:7: [[configs]] #2 topk must be between")


def test_bad_baseline_and_order():
    assert _error(
        '[sweep]\nname = "x"\nbaseline = { mode = "fast" }\n[space]\nbudget=[4]\n'
    ).startswith("t.toml:3:")
    assert "t.toml:3: [sweep] 'order' must be one of" in _error(
        '[sweep]\nname = "x"\norder = "zig"\n[space]\nbudget=[4]\n'
    )


def test_service_and_bench_errors_are_located():
    body = '[sweep]\nname = "x"\n[space]\nbudget = [4]\n[service]\ncommand = ["a"]\nprot = 1\n'
    message = _error(body, service=False)
    assert message.startswith("t.toml:7: [service]") and "prot" in message
    body = (
        '[sweep]\nname = "x"\n[space]\nbudget = [4]\n'
        + SERVICE
        + "[bench]\n[bench.short]\nmax_tokens = 0\n"
    )
    message = _error(body, service=False)
    assert "max_tokens" in message and message.startswith(f"t.toml:{body.count(chr(10))}:")


def test_nothing_to_run_and_bad_toml():
    assert "no configurations" in _error('[sweep]\nname = "x"\n')
    assert "not valid TOML" in _error('[sweep\nname = "x"\n')
    assert "'name' must be" in _error('[sweep]\nname = "a b/c"\n[space]\nbudget=[4]\n')


def test_hash_ignores_comments_and_load_spec_resolves(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(GOOD)
    spec = load_spec(path)
    assert spec.hash == parse_spec("# a comment\n" + GOOD).hash
    assert spec.hash != parse_spec(GOOD.replace("seed = 5", "seed = 6")).hash
    assert spec.base_dir == str(tmp_path.resolve())
    with pytest.raises(UserError, match="cannot read sweep spec"):
        load_spec(tmp_path / "missing.toml")
