"""Live: strategy "predict" without a trace on vLLM's EAGLE-3 (examples/vllm-eagle3-predict-cpu.toml).

Slow (`make test-integration`). The baseline's first bench times forwards over 1..64
tokens on the running server; then num_steps 5 starts, and vLLM's counters of the rounds
accepted at each draft position estimate τ at num_steps 1..4 (`ddtune.trace.chains`).
Asserts: configs the forecast put out never started, and fewer starts than the full race;
the largest num_steps started second and its bench holds the per-position counts; every other started
config's τ, as vLLM's counters measured it, within 6% of its estimate per workload (the
estimate leans low: docs/traces.md "Chains"); every config's T = 0 text identical to the
baseline's; the report names the source of its predictions. Prints the starts, the
verdict and predicted against measured τ (docs/benchmarks.md "EAGLE-3 on vLLM").
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from vllm_setup import REPO, predicted_sweep, sweep_report, tau_as_predicted  # noqa: E402

EXAMPLE = REPO / "examples" / "vllm-eagle3-predict-cpu.toml"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(5400)]


def test_live_eagle3_predict_sweep_starts_few_and_estimates_tau(tmp_path):
    spec, store_path, elapsed, race, records, starts, verdict = predicted_sweep(
        EXAMPLE, tmp_path, configs=6
    )
    order = list(dict.fromkeys(r.label for r in sorted(records, key=lambda r: r.trial_id)))
    print(
        f"\nEAGLE-3 predict sweep: {elapsed:.0f} s, {starts} start(s) in the order {order}, "
        f"{verdict.status} {verdict.label}; stop: {race.stop}"
    )
    top = next(x for x in order if "num_steps=5" in x)
    assert order.index(top) == 1  # the largest num_steps right after the baseline
    anchor = next(r for r in records if r.label == top and r.status == "done")
    assert anchor.draft_counts and len(anchor.draft_counts["accepted_per_position"]) == 5
    baseline = next(r for r in records if r.is_baseline and r.status == "done")
    for record in (r for r in records if r.status == "done" and not r.is_baseline):
        assert record.outputs == baseline.outputs, f"{record.label}: T = 0 text differs from AR"
        tau_as_predicted(race, record, within=0.06, word="estimated")
    report = sweep_report(store_path, tmp_path / "report")
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "counts per draft position" in text
