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

Then the same sweep again under another name in the same store: the first one's start of
the baseline is reused (stored with the new sweep), so its first trial is an n-gram config,
and the baseline's own first bench records the answers and forwards for the next sweep.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from vllm_setup import (  # noqa: E402
    REPO,
    predicted_sweep,
    sweep_report,
    sweep_run,
    tau_as_predicted,
)

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
    _again_in_its_store(spec, store_path, tmp_path)


def _again_in_its_store(spec, store_path: Path, folder: Path) -> None:  # noqa: ANN001
    from ddtune.sweep.store.db import Store
    from ddtune.sweep.store.modes import read_mode

    written = folder / EXAMPLE.name  # the example as `predicted_sweep` wrote it
    again = written.with_name("again.toml")
    again.write_text(written.read_text().replace(f'name = "{spec.name}"', 'name = "again"'))
    elapsed = sweep_run(again, store_path, timeout=5000)
    store = Store(store_path, create=False)
    try:
        sweep_id = store.sweep_row("again")["id"]
        assert read_mode(store, sweep_id).reused is not None
        records = sorted(store.trial_records(sweep_id), key=lambda r: r.trial_id)
    finally:
        store.close()
    print(f"again, in its store: {elapsed:.0f} s, trials {[r.label for r in records]}")
    assert records and not records[0].is_baseline  # the predicted winner first
    own = [r for r in records if r.is_baseline]
    assert own and own[0].token_paths and own[0].forward_probes  # for the next sweep
