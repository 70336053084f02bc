"""Live: `ddtune sweep run examples/vllm-eagle3-cpu.toml` — the bundled EAGLE-3 head on vLLM's
CPU build, num_steps 1..5, against plain AR vLLM, as a user runs it.

Slow (`make test-integration`): six vLLM starts, each serving two passes. Asserts, for every
trial: READY, and on each start the speculative config read back from the running server
(`/server_info?config_format=json`): method eagle3, num_speculative_tokens = num_steps, the
head's path (none for AR); an acceptance length τ from vLLM's counters diffed per run, in
(1, 1 + K] for EAGLE-3 and none for AR, with K per-position shares in the run's note that add
up to it; every EAGLE-3 config's T = 0 outputs equal AR's (the report's losslessness check);
the run at K = 5 predicts τ at K = 1..4 (`ddtune.trace.chains`) within 15 % of the τ measured
there (the estimate's bias on this head is a few per cent: docs/benchmarks.md "EAGLE-3 on
vLLM"); then that the report renders. Prints the read-back, τ per pass and the prediction.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from ddtune.engines.vllm import note_counts
from ddtune.report.lossless import check_losslessness, load_compare
from ddtune.sweep.store.db import Store
from ddtune.trace.chains import ChainCounts, check_lines, compare, predict_all

sys.path.insert(0, str(Path(__file__).parent))
from vllm_setup import REPO, live_example, sweep_report, sweep_run  # noqa: E402

EXAMPLE = REPO / "examples" / "vllm-eagle3-cpu.toml"
HEAD = "src/ddtune/assets/models/eagle3"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(5400)]


def steps_of(label: str) -> int:
    """`eagle3 num_steps=3` -> 3; `ar` -> 0."""
    found = re.search(r"num_steps=(\d+)", label)
    return int(found.group(1)) if found else 0


def check_read_back(store: Store, sweep_id: int) -> None:
    """Every trial done; each start's speculative config read back from the server."""
    for trial in store.trials(sweep_id):
        assert trial["status"] == "done", (trial["label"], trial["status"])
        attempt = store.attempts(trial["id"])[-1]
        assert attempt["failure"] is None
        if trial["repeat"] == 2:
            continue  # the first pass's server
        running = json.loads(attempt["identity_json"]).get("speculative_config")
        k = steps_of(trial["label"])
        print(f"  {trial['label']}: read back {json.dumps(running)[:160]}")
        if k == 0:
            assert running is None
        else:
            assert running["method"] == "eagle3" and running["num_speculative_tokens"] == k
            assert running["model"] == HEAD


def counts_of(note: str, k: int) -> ChainCounts:
    """The run's counts from its acceptance note: K positions, adding up to its accepted."""
    found = note_counts(note)
    assert found is not None, note
    counts = ChainCounts(*found)
    accepted = int(note.split("vLLM counters: ")[1].split()[0])
    assert counts.k == k and sum(counts.accepted_per_position) == accepted, note
    return counts


def test_live_vllm_eagle3_sweep(tmp_path):
    spec_path, spec, store_path = live_example(EXAMPLE, 18749, tmp_path)
    labels = sorted(c.label() for c, _ in spec.all_configs())
    assert labels == ["ar"] + [f"eagle3 num_steps={k}" for k in range(1, 6)]

    elapsed = sweep_run(spec_path, store_path, timeout=5000)
    print(f"\nvLLM EAGLE-3 sweep: {elapsed:.0f} s")

    store = Store(store_path, create=False)
    sweep_id = store.sweep_row(spec.name)["id"]
    assert len(store.trials(sweep_id)) == 12
    check_read_back(store, sweep_id)
    records = store.trial_records(sweep_id)
    notes = {
        row[0]: json.loads(row[1]).get("notes") or []
        for row in store.db.execute("SELECT trial_id, bench_json FROM results")
    }
    store.close()

    by_label, measured, largest = defaultdict(list), defaultdict(list), []
    for record in records:
        by_label[record.label].append(record)
        k, tau = steps_of(record.label), record.metrics.get("acceptance_length")
        counted = [n for n in notes[record.trial_id] if n.startswith("vLLM counters")]
        print(f"  {record.label} pass {record.repeat}: tau {tau} {counted}")
        if k == 0:
            assert tau is None
            continue
        assert tau is not None and 1.0 < tau <= 1 + k, record.metrics
        counts = counts_of(counted[0], k)
        assert counts.tau == pytest.approx(tau)
        measured[k].append(tau)
        if k == 5:
            largest.append(counts)

    baseline = next(r.label for r in records if r.is_baseline)
    for label, verdict in check_losslessness(dict(by_label), baseline, load_compare()).items():
        print(f"  {label}: {verdict.status} {verdict.divergence_class or ''}")
        assert verdict.status in ("identical", "reference") or (
            verdict.divergence_class == "near-tie"
        ), (label, verdict.text)

    pooled = ChainCounts(
        sum(c.drafts for c in largest),
        tuple(sum(col) for col in zip(*(c.accepted_per_position for c in largest), strict=True)),
    )
    means = {k: sum(v) / len(v) for k, v in measured.items()}
    checks = compare(predict_all(pooled), means)
    print("\n".join(check_lines(checks)))
    for check in checks:
        assert abs(check.relative_error) < 0.15, check

    out = tmp_path / "report"
    report = sweep_report(store_path, out)
    assert report.returncode == 0, report.stderr[-4000:]
    assert "num_steps=5" in (out / "report.html").read_text()
