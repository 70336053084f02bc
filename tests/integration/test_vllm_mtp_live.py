"""Live: MTP on vLLM's CPU build, read back the same way as EAGLE-3 — a tiny random model with
one multi-token-prediction layer (`vllm_setup.write_mtp_model`), `method: mtp` at num_steps 1
against plain AR, through `ddtune sweep run` as a user runs it.

Slow (`make test-integration`): two vLLM starts, one pass each. Asserts: both READY; the MTP
start's speculative config read back from the running server is method mtp with
num_speculative_tokens 1 (vLLM fills the draft model in with the target's own path), the AR
start has none; vLLM's counters count drafts for MTP (τ in [1, 2]: random weights accept
next to nothing) and none for AR; the T = 0 text equals AR's (or parts at a near-tie). vLLM's
MiMo MTP drafts one token a round only (`spec_step_idx == 0`), so num_steps is 1
(docs/engines.md "MTP on vLLM").
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from ddtune.report.lossless import check_losslessness, load_compare
from ddtune.sweep.plan import read_spec
from ddtune.sweep.store.db import Store

sys.path.insert(0, str(Path(__file__).parent))
from vllm_setup import ensure_vllm_venv, free_port, sweep_run, write_mtp_model  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

SPEC = """
[sweep]
name = "vllm-mtp-cpu"
repeats = 1
baseline = {{ method = "ar" }}

[space]
method = ["mtp"]

[space.mtp]
num_steps = 1

[service]
control = "process"
engine = "vllm"
cwd = "{repo}"
command = [".venv-vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server",
           "--model", "{model}", "--host", "{{host}}", "--port", "{{port}}", "{{method_args}}",
           "--served-model-name", "mtp", "--max-model-len", "512", "--dtype", "float32",
           "--max-num-seqs", "4"]
port = {port}

[service.env]
VLLM_CPU_KVCACHE_SPACE = "1"
VLLM_CPU_OMP_THREADS_BIND = "1"         # compute on core 1; core 0 left to the API server and the client
HF_HUB_OFFLINE = "1"

[service.timeouts]
start = 900
health = 300

[bench]
temperature = 0
warmup = 1
[bench.short]
n_prompts = 2
prompt_tokens = 60
max_tokens = 24
repeats = 1
"""


def test_live_vllm_mtp_reads_back(tmp_path):
    ensure_vllm_venv()
    repo = Path(__file__).resolve().parents[2]
    model = write_mtp_model(tmp_path / "mtp-model")
    spec_path = tmp_path / "vllm-mtp-cpu.toml"
    spec_path.write_text(SPEC.format(repo=repo, model=model, port=free_port()))
    spec = read_spec(spec_path)
    assert sorted(c.label() for c, _ in spec.all_configs()) == ["ar", "mtp num_steps=1"]
    store_path = tmp_path / "store.sqlite"
    print(f"\nvLLM MTP sweep: {sweep_run(spec_path, store_path, timeout=3000):.0f} s")

    store = Store(store_path, create=False)
    sweep_id = store.sweep_row(spec.name)["id"]
    for trial in store.trials(sweep_id):
        assert trial["status"] == "done", (trial["label"], trial["status"])
        attempt = store.attempts(trial["id"])[-1]
        running = json.loads(attempt["identity_json"]).get("speculative_config")
        print(f"  {trial['label']}: read back {json.dumps(running)[:200]}")
        if trial["label"] == "ar":
            assert running is None
        else:
            assert (running["method"], running["num_speculative_tokens"]) == ("mtp", 1)
            assert running["model"] == str(model)  # vLLM's draft: the target itself
    records = store.trial_records(sweep_id)
    store.close()

    by_label = defaultdict(list)
    for record in records:
        by_label[record.label].append(record)
        tau = record.metrics.get("acceptance_length")
        print(f"  {record.label}: tau {tau}")
        if record.label == "ar":
            assert tau is None
        else:
            assert tau is not None and 1.0 <= tau <= 2.0
    verdicts = check_losslessness(dict(by_label), "ar", load_compare())
    for label, verdict in verdicts.items():
        print(f"  {label}: {verdict.status} {verdict.divergence_class or ''}")
        assert verdict.status in ("identical", "reference") or (
            verdict.divergence_class == "near-tie"
        ), (label, verdict.text)
