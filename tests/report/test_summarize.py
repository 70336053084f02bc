"""Per-config summaries: grouping, intervals, ratios, coding, missing values."""

from __future__ import annotations

import math

import pytest

from ddtune.params import DecodeParams
from ddtune.records import TrialRecord
from ddtune.report.summarize import THROUGHPUT, cost_key, summarize_configs
from ddtune.stats.intervals import positive_mean_ci, ratio_ci


def record(
    label: str, repeat: int, metrics: dict, *, baseline: bool = False, status: str = "done", **kw
) -> TrialRecord:
    params = (
        DecodeParams("ar")
        if label == "ar"
        else DecodeParams("ddtree", *map(int, label.split()[1:]))
    )
    return TrialRecord(
        trial_id=100 * repeat + len(label),
        label=params.label(),
        params=params,
        is_baseline=baseline,
        repeat=repeat,
        status=status,
        metrics=metrics,
        **kw,
    )


def test_groups_by_label_with_a_positive_interval_and_fieller_ratio():
    short_ar, short_dd = [100.0, 104.0, 98.0], [150.0, 160.0, 155.0]
    records = [record("ar", i, {"short_tps": v}, baseline=True) for i, v in enumerate(short_ar)]
    records += [record("ddtree 16 4", i, {"short_tps": v}) for i, v in enumerate(short_dd)]
    baseline, tree = summarize_configs(records)
    assert baseline.is_baseline and baseline.label == "ar" and tree.label == "ddtree b16 k4 wnone"
    assert tree.metrics["short_tps"] == positive_mean_ci(short_dd)  # tok/s: above zero
    assert tree.ratios["short_tps"] == ratio_ci(short_dd, short_ar)
    assert tree.ratios["short_tps"].mean == pytest.approx(155.0 / (302.0 / 3))
    assert baseline.ratios == {}  # the baseline is not compared with itself
    assert tree.metrics["long_tps"] is None  # never measured


def test_single_repeat_has_no_interval_and_says_so():
    s = summarize_configs([record("ddtree 8 2", 0, {"short_tps": 149.0})])[0]
    assert s.metrics["short_tps"].mean == 149.0 and not s.metrics["short_tps"].has_interval
    assert any("n = 1" in note for note in s.notes)


def test_missing_and_nan_metrics_are_skipped_per_repeat():
    records = [
        record("ddtree 8 2", 0, {"short_tps": 150.0, "long_tps": None}),
        record("ddtree 8 2", 1, {"short_tps": float("nan"), "long_tps": 90.0}),
        record("ddtree 8 2", 2, {"short_tps": 154.0, "long_tps": 110.0}),
    ]
    s = summarize_configs(records)[0]
    assert s.samples["short_tps"] == [150.0, 154.0]
    assert s.samples["long_tps"] == [90.0, 110.0]
    assert s.samples[THROUGHPUT] == [pytest.approx(math.sqrt(154.0 * 110.0))]


def test_failed_trials_are_listed_not_averaged():
    records = [
        record("ddtree 8 2", 0, {"short_tps": 150.0}),
        record(
            "ddtree 8 2",
            1,
            {"short_tps": 999.0},
            status="failed",
            failure="oom",
            attempts=3,
            log_tail_path="/runs/x/log_tail.txt",
        ),
    ]
    s = summarize_configs(records)[0]
    assert s.done == 1 and s.trials == 2
    assert s.samples["short_tps"] == [150.0]
    assert [(f.failure, f.attempts, f.log_tail_path) for f in s.failures] == [
        ("oom", 3, "/runs/x/log_tail.txt")
    ]


def test_coding_pooled_over_repeats_with_wilson():
    records = [
        record("ddtree 8 2", 0, {"coding_passed": 4, "coding_total": 5}),
        record("ddtree 8 2", 1, {"coding_passed": 5, "coding_total": 5}),
        record("ddtree 8 2", 2, {"coding_passed": None, "coding_total": None}),
    ]
    coding = summarize_configs(records)[0].coding
    assert (coding.passed, coding.total) == (9, 10)
    assert coding.rate == pytest.approx(0.9)
    assert coding.low == pytest.approx(0.5958, abs=1e-4) and coding.high == pytest.approx(
        0.9821, abs=1e-4
    )


def test_acceptance_distribution_quartiles():
    lengths = [1.0, 2.0, 3.0, 4.0, 5.0]
    s = summarize_configs([record("ddtree 8 2", 0, {}, acceptance_lengths=lengths)])[0]
    a = s.acceptance
    assert (a.n, a.minimum, a.p25, a.median, a.p75, a.maximum) == (5, 1.0, 2.0, 3.0, 4.0, 5.0)


def test_order_is_baseline_then_cheapest():
    records = [record(label, 0, {}) for label in ("ddtree 32 4", "ddtree 16 8", "ddtree 16 4")]
    records.append(record("ar", 0, {}, baseline=True))
    labels = [s.label for s in summarize_configs(records)]
    assert labels == ["ar", "ddtree b16 k4 wnone", "ddtree b16 k8 wnone", "ddtree b32 k4 wnone"]


def test_cost_key_uses_canonical_params():
    assert cost_key(DecodeParams("ar", 64, 8)) < cost_key(DecodeParams("ddtree", 4, 1))
    assert cost_key(DecodeParams("ddtree", 16, 2)) < cost_key(DecodeParams("ddtree", 16, 4))
    # the window breaks ties (a smaller window is cheaper), but never puts dflash before ar
    assert cost_key(DecodeParams("ddtree", 16, 4, 64)) < cost_key(DecodeParams("ddtree", 16, 4))
    assert cost_key(DecodeParams("ar")) < cost_key(DecodeParams("dflash", window=64))
    assert cost_key(DecodeParams("dflash", window=64)) < cost_key(DecodeParams("ddtree", 0, 1))


def test_summary_carries_the_params_and_renders_them_on_the_wire():
    s = summarize_configs([record("ddtree 8 2", 0, {"short_tps": 1.0})])[0]
    assert s.params == DecodeParams("ddtree", 8, 2) and s.vars == {}
    assert s.to_dict()["params"] == {"mode": "ddtree", "budget": 8, "topk": 2, "window": "none"}


def test_records_of_one_label_with_other_vars_get_a_note():
    records = [record("ddtree 8 2", 0, {}), record("ddtree 8 2", 1, {}, vars={"mem": 0.8})]
    assert any("different configurations" in n for n in summarize_configs(records)[0].notes)
