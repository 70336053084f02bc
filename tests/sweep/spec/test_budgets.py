"""One rule, one message (issue 44): a budget below 1, negative or 0, wherever a spec writes
it, is refused with the same line naming the key ("must be at least 1")."""

from __future__ import annotations

import pytest

from ddtune.errors import UserError
from ddtune.sweep.plan.strategies import parse_spec

SERVICE = """
[service]
command = ["srv", "--port", "{port}", "--mode", "{mode}", "--budget", "{budget}",
           "--topk", "{topk}", "--window", "{window}"]
"""
PLACES = {
    "configs.0.budget": '[[configs]]\nmode = "ddtree"\nbudget = {b}\n',
    "space.budget": "[space]\nbudget = [{b}, 8]\n",
    "space.ddtree.budget": '[space]\nmethod = ["ddtree"]\n[space.ddtree]\nbudget = [{b}, 8]\n',
    "sweep.baseline.budget": '[[configs]]\nmode = "ar"\n',
}


@pytest.mark.parametrize("key", sorted(PLACES))
@pytest.mark.parametrize("budget", [-4, 0])
def test_a_budget_below_one_says_the_same_rule_wherever_it_is_written(key, budget):
    sweep = '[sweep]\nname = "b"\n'
    if key == "sweep.baseline.budget":
        sweep += f'baseline = {{ mode = "ddtree", budget = {budget} }}\n'
    text = sweep + PLACES[key].format(b=budget) + SERVICE
    with pytest.raises(UserError) as caught:
        parse_spec(text, source="b.toml")
    message = str(caught.value)
    assert caught.value.key == key
    assert message.endswith(
        f"{key} must be at least 1 (the tree's nodes besides the root; "
        f'use mode = "ar" for no drafting); got {budget}'
    )


def test_a_budget_of_one_is_a_tree():
    text = '[sweep]\nname = "b"\n[[configs]]\nmode = "ddtree"\nbudget = 1\n' + SERVICE
    assert parse_spec(text, source="b.toml").configs[0].params.budget == 1
