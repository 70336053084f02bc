"""Per workload: a recommendation each, one for the mix, and whether one config serves all."""

from __future__ import annotations

from ddtune.params import DecodeParams
from ddtune.records import TrialRecord
from ddtune.report import ReportOptions, analyze

CONFIGS = {
    "ar": (DecodeParams("ar"), True),
    "ddtree b8 k4 wnone": (DecodeParams("ddtree", budget=8, topk=4), False),
    "ddtree b32 k4 wnone": (DecodeParams("ddtree", budget=32, topk=4), False),
}


def records(rates: dict[str, dict[str, float]]) -> list[TrialRecord]:
    """Three passes; per config and workload a tok/s, a little noise per pass."""
    out = []
    for repeat in (1, 2, 3):
        for label, (params, baseline) in CONFIGS.items():
            noise = 1 + 0.004 * ((repeat * 7 + len(label)) % 3 - 1)
            workloads = {
                name: {"tps": tps * noise, "acceptance_length": 2.0, "passed": 3, "total": 4}
                for name, tps in rates[label].items()
            }
            mix = len(workloads) / sum(1 / w["tps"] for w in workloads.values())
            out.append(
                TrialRecord(
                    len(out),
                    label,
                    params,
                    baseline,
                    repeat,
                    "done",
                    metrics={"mix_tps": mix, "coding_passed": 3, "coding_total": 4},
                    workloads=workloads,
                )
            )
    return out


def test_one_config_serving_every_workload_is_said_so() -> None:
    rates = {
        "ar": {"humaneval": 100, "mt-bench": 100},
        "ddtree b8 k4 wnone": {"humaneval": 250, "mt-bench": 180},
        "ddtree b32 k4 wnone": {"humaneval": 200, "mt-bench": 150},
    }
    summary = analyze(records(rates), ReportOptions(tolerance=0.05))
    recs = {r.objective: r for r in summary.recommendations}
    assert recs["mix"].label == "ddtree b8 k4 wnone"
    assert (
        recs["workload:humaneval"].label == recs["workload:mt-bench"].label == "ddtree b8 k4 wnone"
    )
    assert "throughput" not in recs  # no bundled suite: no short/long tok/s to decide on
    assert summary.workloads is not None
    assert summary.workloads.finding.startswith("One config serves every workload")
    assert summary.recommendations[0].objective == "mix"  # the answer's first line


def test_the_workload_that_loses_under_the_mix_is_named_with_its_loss() -> None:
    rates = {
        "ar": {"humaneval": 100, "mt-bench": 100},
        "ddtree b8 k4 wnone": {"humaneval": 200, "mt-bench": 160},
        "ddtree b32 k4 wnone": {"humaneval": 400, "mt-bench": 130},
    }
    summary = analyze(records(rates), ReportOptions(tolerance=0.05))
    recs = {r.objective: r for r in summary.recommendations}
    assert recs["workload:mt-bench"].label == "ddtree b8 k4 wnone"
    assert recs["mix"].label == "ddtree b32 k4 wnone"
    assert summary.workloads is not None
    finding = summary.workloads.finding
    assert "mt-bench would lose 19% (its best: ddtree b8 k4 wnone)" in finding
    assert "humaneval" not in finding.split(":", 1)[1]
    assert "per workload (tok/s | τ | pass):" in summary.terminal_table()


def test_a_bench_of_the_bundled_suite_alone_keeps_todays_objectives() -> None:
    rates = {label: {"bundled": 100.0} for label in CONFIGS}
    summary = analyze(records(rates), ReportOptions())
    assert [r.objective for r in summary.recommendations][:3] == [
        "throughput",
        "long_context",
        "short_context",
    ]
    assert summary.workloads is None


def test_results_csv_has_per_workload_columns(tmp_path) -> None:  # noqa: ANN001
    import csv

    from ddtune.report import build_report

    rates = {
        "ar": {"humaneval": 100, "gsm8k": 90},
        "ddtree b8 k4 wnone": {"humaneval": 250, "gsm8k": 180},
        "ddtree b32 k4 wnone": {"humaneval": 200, "gsm8k": 150},
    }
    summary = build_report(records(rates), tmp_path, ReportOptions(plots=False))
    with summary.files["csv"].open() as handle:
        rows = {r["label"]: r for r in csv.DictReader(handle)}
    assert float(rows["ddtree b8 k4 wnone"]["humaneval_tps_mean"]) > 240
    assert rows["ar"]["gsm8k_passed"] == "9" and rows["ar"]["gsm8k_total"] == "12"
    assert "Workloads" in summary.files["markdown"].read_text()
