"""Live: predict, then confirm, as a user runs it on this CPU (`examples/predict-cpu.toml`).

Slow. `ddtune trace record --spec` of the example (the bench's requests, windows 64 and
none), `ddtune sweep run` of it (every trial a real `ddtune serve` restart), `ddtune sweep
report`; then `ddtune trace record --store` of the finished sweep. Asserts: the sweep
concludes, or stops early and says the passes left could not decide (rule 6: on this VM a
start moves a config by 10-15%, and the leader and plain decoding can be within a few percent),
before its 10th pass; every measured config's acceptance equals the trace's prediction exactly (ddtune's
server counts as the replay does); unless the check fell back (a loaded machine can move
tok/s outside the model's interval, and the report then says so), configs were left out
without a start; the report's "Predicted vs measured" table lists every config; the trace
from the store's baseline outputs holds the same tokens as the engine's own.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ddtune.trace.predict import Trace

sys.path.insert(0, str(Path(__file__).parent))
from vllm_setup import REPO, free_port  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
CLI = [sys.executable, "-m", "ddtune.cli"]


def test_predict_then_confirm_on_this_cpu(tmp_path):
    trace = tmp_path / "trace"
    text = (REPO / "examples" / "predict-cpu.toml").read_text()
    text = re.sub(r'(?m)^trace = ".*"', f'trace = "{trace}"', text)
    text = re.sub(r"(?m)^port = \d+", f"port = {free_port()}", text)
    spec = tmp_path / "predict.toml"
    spec.write_text(text)
    store = tmp_path / "store.sqlite"
    subprocess.run(
        [*CLI, "trace", "record", "--spec", str(spec), "--out", str(trace)], check=True, cwd=REPO
    )
    run = subprocess.run(
        [*CLI, "sweep", "run", str(spec), "--store", str(store)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    subprocess.run(
        [*CLI, "sweep", "report", "--store", str(store), "--out", str(tmp_path / "report")],
        check=True,
        cwd=REPO,
        capture_output=True,
    )
    report = json.loads((tmp_path / "report" / "results.json").read_text())["report"]
    context, configs = report["context"], {c["label"]: c for c in report["configs"]}
    predictions = {p["label"]: p for p in context["predictions"]}
    assert set(configs) <= set(predictions)  # every measured config was predicted too
    measured = [p for p in predictions.values() if p["status"] == "started"]
    assert measured
    for p in measured:
        tau = configs[p["label"]]["metrics"]["acceptance_length"]["mean"]
        assert tau == pytest.approx(p["acceptance"], abs=1e-9), p["label"]
    if context["fallback"] is None:
        assert len(measured) < len(predictions)
        assert {p["status"] for p in predictions.values()} & {"dominated", "predicted out"}
    status = report["recommendations"][0]["status"]
    if context["stop"] == "futile":  # two configs too close for this machine's starts to part
        assert status == "inconclusive" and context["passes"] < 10, context["passes"]
    else:
        assert status in ("separated", "equivalent")
    assert "Predicted vs measured" in (tmp_path / "report" / "report.md").read_text()
    from_store = tmp_path / "from-store"
    subprocess.run(
        [*CLI, "trace", "record", "--store", str(store), "--out", str(from_store)],
        check=True,
        cwd=REPO,
    )
    for a, b in zip(Trace.read(trace).data, Trace.read(from_store).data, strict=True):
        assert (a.tokens == b.tokens).all() and b.greedy_mismatches == 0
    print(
        f"PREDICT-LIVE {len(measured)} of {len(predictions)} configs started; "
        f"fallback: {context['fallback']}; {report['recommendations'][0]['text']}"
    )
