"""A chain group's largest K predicts the rest of its group, per workload, and nothing else."""

from __future__ import annotations

import pytest

from ddtune.methods import needs_trace
from ddtune.params import DecodeParams
from ddtune.trace.chains import ChainCounts, predict_tau
from ddtune.trace.chains.forecast import ChainRun, chain_anchors, chains_forecast, merged
from ddtune.trace.forecast import Forecast, config_cost
from ddtune.trace.round_cost import Shape


def eagle3(steps: int, **knobs: object) -> DecodeParams:
    return DecodeParams.from_wire(
        {"method": "eagle3", "method_knobs": {"num_steps": steps, **knobs}}
    )


CONFIGS = {
    "ar": DecodeParams("ar"),
    "k1": eagle3(1),
    "k3": eagle3(3),
    "k4": eagle3(4),
    "other k2": eagle3(2, drafter="/heads/b"),
    "other k5": eagle3(5, drafter="/heads/b"),
    "tree": eagle3(3, topk=4, num_draft_tokens=8),
    "ngram": DecodeParams.from_wire({"method": "ngram", "method_knobs": {"num_draft_tokens": 3}}),
}


def test_each_group_is_predicted_from_its_largest_steps():
    anchors = chain_anchors(CONFIGS)
    assert anchors == {
        "k1": "k4",
        "k3": "k4",
        "k4": "k4",
        "other k2": "other k5",
        "other k5": "other k5",
    }
    # topk > 1 (a tree's drafts depend on more than K), ar and n-gram: no chain group


def test_the_forecast_scales_each_workloads_tau_by_the_pooled_estimate():
    counts = ChainCounts(200, (180, 150, 110, 80))  # the run at K = 4: tau 3.6 pooled
    run = ChainRun(counts, {"short": 4.0, "long": 3.0})
    forecast = chains_forecast(CONFIGS, {"k4": run})
    assert set(forecast.shapes) == {"k1", "k3", "k4"}  # the other group's anchor has not run
    k4, k1 = forecast.shapes["k4"], forecast.shapes["k1"]
    assert k4["short"].acceptance == pytest.approx(4.0) and k4["long"].acceptance == 3.0
    scale = (predict_tau(counts, 1).tau - 1) / (counts.tau - 1)
    assert k1["short"].acceptance == pytest.approx(1 + 3.0 * scale)
    assert k1["long"].acceptance == pytest.approx(1 + 2.0 * scale)
    assert (k1["short"].verify_tokens, k1["short"].draft_steps, k1["short"].mode) == (2, 1, "chain")
    assert forecast.groups["k1"] == forecast.groups["k4"] == "the counts of k4"


def test_merged_forecasts_keep_both_sources():
    cost = config_cost(CONFIGS)
    answers = Forecast({"ar": {"short": Shape("ar", 1.0, 1, 0.0)}}, {"ar": None}, cost, source="a")
    short = chains_forecast(CONFIGS, {"k4": ChainRun(ChainCounts(10, (5,)), {"short": 1.5})})
    assert set(short.shapes) == {"k1"}  # one position counted: K = 1 only
    chains = chains_forecast(CONFIGS, {"k4": ChainRun(ChainCounts(10, (9, 8, 6, 5)), {"short": 3})})
    both = merged(answers, chains)
    assert set(both.shapes) == {"ar", "k1", "k3", "k4"} and both.source.startswith("a and ")


def test_chains_need_no_trace_only_where_the_engine_counts_per_position():
    assert needs_trace({"ar", "ngram", "eagle3", "mtp"}, counts_drafts=True) == []
    assert needs_trace({"ar", "eagle3", "ddtree"}, counts_drafts=False) == ["ddtree", "eagle3"]


def test_a_workloads_own_counts_give_its_own_estimate():
    """Counted per workload, each workload's τ at a smaller K is its own estimate (the
    pooled scaling would carry one workload's shape onto the other)."""
    short, long = ChainCounts(100, (90, 80, 70, 60)), ChainCounts(100, (80, 50, 30, 20))
    pooled = ChainCounts(200, (170, 130, 100, 80))
    run = ChainRun(pooled, {"short": short.tau, "long": long.tau}, {"short": short, "long": long})
    forecast = chains_forecast(CONFIGS, {"k4": run})
    assert forecast.shapes["k1"]["long"].acceptance == pytest.approx(1.8)  # 1 + 80 / 100
    assert forecast.shapes["k3"]["short"].acceptance == pytest.approx(1 + 2.4)
    assert forecast.shapes["k4"]["long"].acceptance == pytest.approx(long.tau)
