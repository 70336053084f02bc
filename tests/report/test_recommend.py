"""Decisions on synthetic sweeps with known effects: recommendation, inconclusive, ties, Pareto."""

from __future__ import annotations

from ddtune.params import DecodeParams
from ddtune.records import TrialRecord
from ddtune.report import ReportOptions, analyze
from ddtune.report.recommend import pareto_front
from ddtune.report.summarize import summarize_configs

BEST = "ddtree b16 k4 wnone"


def test_known_best_config_is_recommended_for_every_objective(synth):
    summary = analyze(synth.make_records(synth.standard_effects(), repeats=3), ReportOptions())
    for objective in ("throughput", "long_context", "short_context"):
        rec = summary.recommendation(objective)
        assert (rec.status, rec.label, rec.contenders) == ("separated", BEST, [])
        assert rec.leader == BEST and rec.equivalent == []
    assert "x baseline" in summary.recommendation("throughput").text
    assert "paired by pass" in summary.recommendation("throughput").analysis


def test_close_configs_with_few_repeats_are_inconclusive_with_a_power_estimate(synth):
    Effect, make_records = synth.Effect, synth.make_records
    effects = [
        Effect(DecodeParams("ddtree", 16, 4), 170.0, 120.0, 4.0, sd=0.05),
        Effect(DecodeParams("ddtree", 8, 2), 164.0, 116.0, 3.6, sd=0.05),
    ]
    summary = analyze(make_records(effects, repeats=2, seed=3), ReportOptions())
    rec = summary.recommendation("short_context")
    assert rec.status == "inconclusive"
    assert rec.label in (BEST, "ddtree b8 k2 wnone") and len(rec.contenders) == 1
    assert rec.required_repeats is not None and rec.required_repeats > 2
    assert f"About {rec.required_repeats} passes per config (now 2)" in rec.text


def test_single_runs_like_the_seed_sweep_are_inconclusive(synth):
    Effect, make_records = synth.Effect, synth.make_records
    # the seed read 149 vs 170 tok/s from one run each as a difference
    effects = [
        Effect(DecodeParams("ddtree", 16, 4), 149.0, 100.0, 4.0, sd=0.0),
        Effect(DecodeParams("ddtree", 32, 4), 170.0, 110.0, 4.2, sd=0.0),
    ]
    rec = analyze(make_records(effects, repeats=1), ReportOptions()).recommendation("short_context")
    assert rec.status == "inconclusive" and rec.label == "ddtree b32 k4 wnone"
    assert rec.required_repeats is None
    assert "Run at least 2 passes" in rec.text


def test_many_repeats_separate_the_same_effect(synth):
    Effect, make_records = synth.Effect, synth.make_records
    effects = [
        Effect(DecodeParams("ddtree", 16, 4), 170.0, 120.0, 4.0, sd=0.01),
        Effect(DecodeParams("ddtree", 8, 2), 160.0, 110.0, 3.6, sd=0.01),
    ]
    rec = analyze(make_records(effects, repeats=6, seed=1), ReportOptions()).recommendation(
        "short_context"
    )
    assert (rec.status, rec.label) == ("separated", BEST)


def test_equivalent_configs_recommend_the_cheapest(synth):
    Effect, make_records = synth.Effect, synth.make_records
    effects = [
        Effect(DecodeParams("ddtree", 32, 8), 171.0, 121.0, 4.1, sd=0.001),
        Effect(DecodeParams("ddtree", 16, 8), 170.0, 120.0, 4.0, sd=0.001),
        Effect(DecodeParams("ddtree", 16, 4), 169.5, 119.5, 4.0, sd=0.001),
    ]
    summary = analyze(make_records(effects, repeats=4), ReportOptions(tolerance=0.03))
    rec = summary.recommendation("short_context")
    assert (rec.status, rec.label, rec.leader) == ("equivalent", BEST, "ddtree b32 k8 wnone")
    assert sorted(rec.equivalent) == [BEST, "ddtree b16 k8 wnone"]
    assert (
        "the cheapest of the equivalent configs, so recommended (ddtree b32 k8 wnone is the fastest)"
        in rec.text
    )
    strict = analyze(make_records(effects, repeats=4), ReportOptions(tolerance=0.001))
    rec = strict.recommendation("short_context")
    assert (rec.status, rec.label) == ("separated", "ddtree b32 k8 wnone")


def test_throughput_excludes_a_config_significantly_worse_at_coding(synth):
    Effect, make_records = synth.Effect, synth.make_records
    effects = synth.standard_effects()
    effects[3] = Effect(DecodeParams("ddtree", 16, 4), 190.0, 150.0, 4.5, passed=2)  # 6/30 vs 30/30
    summary = analyze(make_records(effects, repeats=3), ReportOptions())
    assert summary.pass_rates[BEST].significantly_below
    throughput = summary.recommendation("throughput")
    assert throughput.label == "ddtree b32 k4 wnone" and BEST in throughput.excluded
    assert summary.recommendation("long_context").label == BEST  # speed objectives ignore coding


def test_four_of_five_vs_five_of_five_is_not_a_difference(synth):
    Effect, make_records = synth.Effect, synth.make_records
    effects = [
        Effect(DecodeParams("ddtree", 16, 4), 190.0, 150.0, 4.5, passed=4, total=5),
        Effect(DecodeParams("ddtree", 8, 2), 150.0, 110.0, 3.5, passed=5, total=5),
    ]
    summary = analyze(make_records(effects, repeats=1), ReportOptions())
    comparison = summary.pass_rates[BEST]
    assert comparison.p_value == 1.0 and not comparison.significantly_below
    assert "n is too small to separate" in comparison.text and "4/5 vs 5/5" in comparison.text
    assert summary.best_pass_rate == "ddtree b8 k2 wnone"
    assert BEST not in summary.recommendation("throughput").excluded


def test_pareto_front_keeps_each_trade_off_and_drops_dominated(synth):
    Effect, make_records = synth.Effect, synth.make_records
    effects = [
        Effect(DecodeParams("ddtree", 8, 2), 200.0, 100.0, 4.0),  # best short
        Effect(DecodeParams("ddtree", 16, 4), 150.0, 160.0, 4.0),  # best long
        Effect(DecodeParams("ddtree", 32, 4), 140.0, 150.0, 4.0),  # dominated by b16 k4
    ]
    configs = summarize_configs(make_records(effects, repeats=2))
    assert pareto_front(configs) == ["ddtree b8 k2 wnone", BEST]


def test_no_data_objective_says_so(synth):
    Effect, make_records = synth.Effect, synth.make_records
    effects = [Effect(DecodeParams("ddtree", 8, 2), 150.0, 110.0, 3.5)]
    records = make_records(effects, repeats=2)
    for r in records:
        r.metrics["long_tps"] = None
    summary = analyze(records, ReportOptions())
    assert summary.recommendation("long_context").status == "no data"
    assert summary.recommendation("throughput").status == "no data"
    assert summary.recommendation("short_context").label == "ddtree b8 k2 wnone"


def _fixed(params: DecodeParams, short: list[float]) -> list[TrialRecord]:
    return [
        TrialRecord(i, params.label(), params, False, i, "done", metrics={"short_tps": v})
        for i, v in enumerate(short)
    ]


def test_overlapping_intervals_but_a_clear_paired_difference_is_separated():
    # A: mean 110, B: mean 104, sd ~5.4, n = 8: the 95% intervals overlap, but each pass
    # moves both configs together (the same offsets): the per-pass ratio is nearly constant
    spread = [-7.0, -5.0, -3.0, -1.0, 1.0, 3.0, 5.0, 7.0]
    a = _fixed(DecodeParams("ddtree", 16, 4), [110.0 + d for d in spread])
    b = _fixed(DecodeParams("ddtree", 8, 2), [104.0 + d for d in spread])
    summary = analyze(a + b, ReportOptions())
    ci_a, ci_b = (summary.config(s).metrics["short_tps"] for s in (BEST, "ddtree b8 k2 wnone"))
    assert ci_a.low < ci_b.high  # the premise: the intervals overlap
    rec = summary.recommendation("short_context")
    assert (rec.status, rec.label) == ("separated", BEST)
    assert "paired by pass over up to 8 passes" in rec.analysis
    welch = analyze(a + b, ReportOptions(blocked=False)).recommendation("short_context")
    assert welch.status == "separated" and "Welch" in welch.analysis  # p ~ 0.04 on the logs


def test_pareto_front_is_empty_when_nothing_was_measured():
    records = _fixed(DecodeParams("ddtree", 16, 4), [100.0])
    records[0].metrics = {}
    assert analyze(records, ReportOptions()).pareto == []


def test_a_race_objective_decides_among_the_race_contenders_only(synth):
    """Configs a race eliminated are out of its objective's verdict (their tests are in the
    race table): with one contender left the verdict is separated, and says why."""
    from ddtune.records import Elimination, SweepContext

    Effect, make_records = synth.Effect, synth.make_records
    effects = [
        Effect(DecodeParams("ddtree", 16, 4), 170.0, 120.0, 4.0, sd=0.05),
        Effect(DecodeParams("ddtree", 8, 2), 164.0, 116.0, 3.6, sd=0.05),
    ]
    records = make_records(effects, repeats=2, seed=3)
    plain = analyze(records, ReportOptions()).recommendation("throughput")
    assert plain.status == "inconclusive"  # 2 passes, 3.5% apart: the data alone cannot tell
    exit_ = Elimination("ddtree b8 k2 wnone", 2, "worse", "Holm p = 0.01")
    context = SweepContext(
        "race", "throughput", passes=2, stop="one_left", exits=[exit_], race=True
    )
    summary = analyze(records, ReportOptions(), context)
    rec = summary.recommendation("throughput")
    assert (rec.status, rec.label, rec.left_race) == ("separated", BEST, ["ddtree b8 k2 wnone"])
    assert "The one config left in the race" in rec.text and "Left the race" in rec.text
    other = summary.recommendation("short_context")  # not the race's objective: all configs
    assert other.left_race == [] and other.status == "inconclusive"
