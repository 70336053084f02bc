"""Live: `ddtune sweep run examples/vllm-methods-cpu.toml` — AR, n-gram and DFlash on vLLM,
named as methods (`ddtune.methods`) and rendered by `{method_args}`.

Slow (`make test-integration`): three vLLM starts (one per method, two passes each).
Asserts, for every trial: READY with an identity whose speculative config was read back
from the running server (`/server_info?config_format=json`) and equals the method's (none
for AR); an acceptance length from vLLM's counters diffed per run, in (1, 1 + K] for the
speculative methods and none for AR, with vLLM's per-position acceptance in the run's note
(falling with the position); labels that name the method and its knobs. Prints each
trial's read-back, acceptance and note (docs/benchmarks.md "Methods × engines").
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ddtune.sweep.store.db import Store

sys.path.insert(0, str(Path(__file__).parent))
from vllm_setup import REPO, live_example, sweep_run  # noqa: E402

EXAMPLE = REPO / "examples" / "vllm-methods-cpu.toml"
DRAFTS = {"ar": 0, "ngram": 4, "dflash": 7}  # num_speculative_tokens per method

pytestmark = [pytest.mark.slow, pytest.mark.timeout(5400)]


def method_of(label: str) -> str:
    return label.split()[0]


def test_live_vllm_methods_sweep(tmp_path):
    spec_path, spec, store_path = live_example(EXAMPLE, 18747, tmp_path)
    labels = sorted(c.label() for c, _ in spec.all_configs())
    assert labels == [
        "ar",
        "dflash wnone block_size=8",
        "ngram num_draft_tokens=4 prompt_lookup_max=3",
    ]

    elapsed = sweep_run(spec_path, store_path, timeout=5000)
    print(f"\nvLLM methods sweep: {elapsed:.0f} s")

    store = Store(store_path, create=False)
    sweep_id = store.sweep_row(spec.name)["id"]
    trials = store.trials(sweep_id)
    assert len(trials) == 6
    for trial in trials:
        assert trial["status"] == "done", (trial["label"], trial["status"])
        attempt = store.attempts(trial["id"])[-1]
        assert attempt["failure"] is None
        if trial["repeat"] == 2:
            continue  # the first pass's server
        identity = json.loads(attempt["identity_json"])
        method = method_of(trial["label"])
        running = identity.get("speculative_config")
        print(f"  {trial['label']}: read back {json.dumps(running)[:300]}")
        if method == "ar":
            assert "--speculative-config" not in " ".join(identity.get("argv", []))
        else:
            assert running["method"] == method
            assert running["num_speculative_tokens"] == DRAFTS[method]
    records = store.trial_records(sweep_id)
    notes = {
        row[0]: json.loads(row[1]).get("notes") or []
        for row in store.db.execute("SELECT trial_id, bench_json FROM results")
    }
    store.close()

    for record in records:
        method, value = method_of(record.label), record.metrics.get("acceptance_length")
        counted = [n for n in notes[record.trial_id] if n.startswith("vLLM counters")]
        print(f"  {record.label} pass {record.repeat}: acceptance {value} {counted}")
        if method == "ar":
            assert value is None
            continue
        assert value is not None and 1.0 < value <= 1 + DRAFTS[method], record.metrics
        shares = counted[0].split("per draft position ")[1].split(" (")[0]
        rates = [float(r) for r in shares.split()]
        assert len(rates) == DRAFTS[method] and rates[0] >= rates[-1]  # vLLM's per position
        # they add up to the acceptance length (each printed to 2 decimals)
        assert abs(1 + sum(rates) - value) <= 0.005 * len(rates)
