"""Live: strategy "predict" without a trace on vLLM's n-gram (examples/vllm-ngram-predict-cpu.toml).

Slow (`make test-integration`). The baseline's first bench records its T = 0 answers as
token ids and times forwards over 1..64 tokens on the running server; every n-gram
config's acceptance follows from those answers exactly, so the sweep starts the baseline
and only the configs that could still win. Asserts: configs the forecast put out never
started, and fewer starts than the full race; the baseline's bench holds token paths and
forward probes; every started n-gram config's acceptance as vLLM's counters measured it
within 5% of the prediction, per workload; the report's "Predicted vs measured" names the
baseline's answers as its source. Prints the starts, the verdict and predicted against
measured τ (docs/benchmarks.md "Predict, then confirm").
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from vllm_setup import REPO, predicted_sweep, sweep_report, tau_as_predicted  # noqa: E402

EXAMPLE = REPO / "examples" / "vllm-ngram-predict-cpu.toml"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(5400)]


def test_live_ngram_predict_sweep_starts_few_and_predicts_tau(tmp_path):
    spec, store_path, elapsed, race, records, starts, verdict = predicted_sweep(
        EXAMPLE, tmp_path, configs=9
    )
    print(
        f"\nn-gram predict sweep: {elapsed:.0f} s, {starts} start(s), {verdict.status} "
        f"{verdict.label}; stop: {race.stop}"
    )
    baseline = next(r for r in records if r.is_baseline and r.repeat == 1)
    assert baseline.token_paths and baseline.forward_probes
    measured = [r for r in records if r.status == "done" and not r.is_baseline]
    assert measured
    for record in measured:
        tau_as_predicted(race, record, within=0.05)
    report = sweep_report(store_path, tmp_path / "report")
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "The baseline's T = 0 answers predicted every config's rounds" in text
