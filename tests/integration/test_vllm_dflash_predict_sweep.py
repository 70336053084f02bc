"""Live: strategy "predict" with a trace on vLLM's DFlash (examples/vllm-dflash-predict-cpu.toml).

Slow (`make test-integration`). `ddtune trace record --spec` records the bundled drafter
the way vLLM runs it (pre-norm capture, one view per `block_size` = K + 1), then the sweep
starts the baseline (its first bench times forwards over 1..64 tokens) and only the Ks that
could still win. Asserts: the forecast gives each K its own τ (not the full block's for all);
configs it put out never started, and fewer starts than the full race; every started K's τ,
as vLLM's counters measured it, within 5% of its prediction per workload; its T = 0 text
identical to the baseline's; the report names the trace as the source. Prints the starts,
the verdict and predicted against measured τ (docs/benchmarks.md "vLLM's DFlash").
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from vllm_setup import REPO, predicted_sweep, sweep_report, tau_as_predicted  # noqa: E402

EXAMPLE = REPO / "examples" / "vllm-dflash-predict-cpu.toml"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(5400)]


def test_live_dflash_predict_sweep_predicts_each_k_from_one_trace(tmp_path):
    spec, store_path, elapsed, race, records, starts, verdict = predicted_sweep(
        EXAMPLE, tmp_path, configs=8, traced=True
    )
    print(
        f"\nDFlash predict sweep: {elapsed:.0f} s, {starts} start(s), {verdict.status} "
        f"{verdict.label}; stop: {race.stop}"
    )
    predicted = {x: tau for x, tau in race.forecast.acceptance.items() if "block_size" in x}
    assert len(set(predicted.values())) >= 6, predicted  # seven Ks, not one block's τ for all
    baseline = next(r for r in records if r.is_baseline and r.status == "done")
    measured = [r for r in records if r.status == "done" and not r.is_baseline]
    assert measured
    for record in measured:
        assert record.outputs == baseline.outputs, f"{record.label}: T = 0 text differs from AR"
        tau_as_predicted(race, record, within=0.05)
    report = sweep_report(store_path, tmp_path / "report")
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "The trace " in text and "predicted every config's rounds" in text
