"""A spec that names methods (`[space] method = [...]`, `[space.<method>]`, `[[configs]]
method = ...`): the grid per method, refusals that name the method's knobs, the engine's
spelling through `{method_args}` (argv, environment, hooks) and labels in the plan."""

from __future__ import annotations

import textwrap

import pytest

from ddtune.errors import UserError
from ddtune.sweep.plan import parse_spec
from ddtune.sweep.spec.parse import SweepSpec

SGLANG = """
[service]
control = "process"
engine = "sglang"
command = ["python", "-m", "sglang.launch_server", "--port", "{port}", "{method_args}"]
"""
MIXED = """
[sweep]
name = "mixed"
baseline = { method = "ar" }
[space]
method = ["eagle3", "dflash", "ddtree"]
budget = [8, 16]
[space.eagle3]
num_steps = [3, 5]
topk = 1
drafter = "/m/eagle3"
[space.dflash]
block_size = 8
window = [64, "none"]
drafter = "/m/dflash"
[space.ddtree]
drafter = "/m/dflash"
[[configs]]
method = "ngram"
num_draft_tokens = 8
max_bfs_breadth = 4
"""


def spec(text: str, service: str = SGLANG) -> SweepSpec:
    return parse_spec(textwrap.dedent(text) + service, "t.toml")


def error(text: str, service: str = SGLANG) -> UserError:
    with pytest.raises(UserError) as caught:
        spec(text, service)
    return caught.value


def test_a_sweep_mixes_methods_each_with_its_own_axes():
    loaded = spec(MIXED)
    assert loaded.baseline is not None and loaded.baseline.label() == "ar"
    assert [c.label() for c in loaded.configs] == [
        "eagle3 num_steps=3 topk=1 num_draft_tokens=4",
        "eagle3 num_steps=5 topk=1 num_draft_tokens=6",
        "dflash w64 block_size=8",
        "dflash wnone block_size=8",
        "ddtree b8 k4 wnone",
        "ddtree b16 k4 wnone",
        "ngram num_draft_tokens=8 max_bfs_breadth=4",
    ]


def test_method_args_is_the_engines_spelling_of_each_config():
    loaded = spec(MIXED)
    configs = [loaded.baseline, *loaded.configs]
    argv = {c.label(): loaded.service.render_argv(c.params, {})[5:] for c in configs if c}
    assert argv["ar"] == []
    assert argv["eagle3 num_steps=3 topk=1 num_draft_tokens=4"] == [
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/m/eagle3",
        "--speculative-num-draft-tokens", "4", "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1",
    ]  # fmt: skip
    assert argv["ddtree b8 k4 wnone"][-2:] == ["--speculative-ddtree-budget", "8"]
    ddtree = loaded.configs[4]
    assert loaded.service.render_env(ddtree.params, {}) == {"SGLANG_DDTREE_MAX_TOPK": "4"}
    assert argv["ngram num_draft_tokens=8 max_bfs_breadth=4"] == [
        "--speculative-algorithm", "NGRAM", "--speculative-ngram-max-bfs-breadth", "4",
        "--speculative-num-draft-tokens", "8",
    ]  # fmt: skip


def test_vllm_spelling_and_hooks_get_the_flags_too():
    vllm = SGLANG.replace('"sglang"', '"vllm"')
    text = '[sweep]\nname = "v"\nbaseline = { method = "ar" }\n[space]\nmethod = ["ngram"]\n'
    text += "[space.ngram]\nnum_draft_tokens = [2, 4]\nprompt_lookup_max = 3\n"
    loaded = spec(text, vllm)
    first = loaded.configs[0]
    assert loaded.service.render_argv(first.params, {})[5:] == [
        "--speculative-config",
        '{"method":"ngram","num_speculative_tokens":2,"prompt_lookup_max":3}',
    ]
    assert loaded.service.render_env(first.params, {}) == {"VLLM_SERVER_DEV_MODE": "1"}
    hooks = '[service]\ncontrol = "hooks"\nengine = "vllm"\nhooks = { start = "s", stop = "t" }\n'
    env = spec(text, hooks).service.hook_env(first.params, {})
    assert env["DDTUNE_METHOD"] == "ngram"
    assert env["DDTUNE_METHOD_ARGS"].startswith('--speculative-config \'{"method":"ngram"')


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        (
            '[space]\nmethod = ["eagle3"]\n[space.eagle3]\nbudget = [8]\n',
            "space.eagle3.budget",
            "method eagle3 has no knob 'budget'; its knobs: num_steps, topk, num_draft_tokens, "
            "drafter",
        ),
        (
            '[space]\nmethod = ["ar", "dflash"]\n[space.eagle]\nnum_steps = 3\n',
            "space.eagle",
            "method 'eagle' is not in space.method (ar, dflash)",
        ),
        (
            '[space]\nmode = ["ar"]\nmethod = ["dflash"]\n',
            "space.mode",
            "write method = [...] alone",
        ),
        (
            '[[configs]]\nmethod = "ngram"\nprompt_lookup_max = 3\nnum_draft_tokens = 4\n',
            "configs.0",
            "sglang cannot set prompt_lookup_max for ngram (it takes num_draft_tokens, "
            "min_bfs_breadth, max_bfs_breadth, max_trie_depth)",
        ),
        (
            '[[configs]]\nmethod = "eagle"\nnum_steps = 3\ndrafter = "d"\n',
            "configs.0",
            "SGLang needs num_steps, topk and num_draft_tokens all set or none",
        ),
    ],
)
def test_what_a_method_or_engine_lacks_is_refused(text, key, message):
    caught = error('[sweep]\nname = "x"\n' + text)
    assert caught.key == key and message in str(caught), str(caught)


def test_method_knobs_without_method_args_would_be_dropped_so_they_are_refused():
    plain = SGLANG.replace(', "{method_args}"', "")
    caught = error(
        '[sweep]\nname = "x"\n[[configs]]\nmethod = "ngram"\nnum_draft_tokens = 4\n', plain
    )
    assert "add a {method_args} argument" in str(caught)


def test_mode_and_vars_specs_are_unchanged():
    text = '[sweep]\nname = "x"\n[space]\nmode = ["ar", "ddtree"]\nbudget = [8]\n'
    loaded = spec(text, SGLANG.replace(', "{method_args}"', ', "{mode}"'))
    assert [c.label() for c in loaded.configs] == ["ar", "ddtree b8 k4 wnone"]
    assert all(c.params.method is None for c in loaded.configs)


def test_a_search_over_methods_is_refused_not_dropped():
    text = '[sweep]\nname = "x"\nstrategy = "optuna"\n[space]\nmethod = ["ar", "ngram"]\n'
    caught = error(text)
    assert caught.key == "space.method" and "strategy 'grid' or 'race'" in str(caught)
