"""The trace's acceptance, counted as ddtune's server counts it, equals what a live server reports.

One `ddtune serve` with the bundled float32 models, reconfigured in place between
configs; each bench's `acceptance_length` (its `usage.spec`, pooled by rounds, coding
requests with their stop strings included) must equal the trace's prediction exactly.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from ddtune.assets import default_drafter_dir, default_target_dir
from ddtune.bench import BenchMatrix, run_bench
from ddtune.engines import get_engine
from ddtune.params import DecodeParams
from ddtune.trace.predict import Trace
from ddtune.trace.record import OwnTarget, TraceSettings, record_trace
from ddtune.trace.sources import requests_from_matrix

MATRIX = BenchMatrix.from_dict(
    {
        "temperature": 0,
        "warmup": 0,
        "short": {"n_prompts": 2, "prompt_tokens": 60, "max_tokens": 24, "repeats": 1},
        "long": {"n_prompts": 1, "prompt_tokens": 200, "max_tokens": 24, "repeats": 2},
        "coding": {"limit": 2, "max_tokens": 48},
        "logprob_gaps": False,
    }
)
CONFIGS = [
    DecodeParams("ddtree", 16, 4, None),
    DecodeParams("ddtree", 8, 2, 64),
    DecodeParams("dflash", 0, 1, 64),
    DecodeParams("ar", 0, 1, None),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, common) -> Iterator[str]:  # noqa: ANN001
    folder = tmp_path_factory.mktemp("live-trace")
    args = common.serve_args(default_target_dir(), default_drafter_dir(), mode="ar")
    with common.serving(args, folder / "serve.log") as live:
        yield live.base_url


def test_predicted_acceptance_equals_the_servers(server, tmp_path):
    requests, _ = requests_from_matrix(MATRIX)
    side = OwnTarget(default_target_dir(), default_drafter_dir())
    record_trace(side, requests, tmp_path / "trace", TraceSettings((None, 64), (), 4))
    trace, kind = Trace.read(tmp_path / "trace"), get_engine("ddtune")
    for params in CONFIGS:
        reply = httpx.post(f"{server}/v1/ddtree/config", json=params.to_wire(), timeout=60)
        assert reply.status_code == 200, reply.text
        result = run_bench(server, MATRIX, engine="ddtune", progress=False)
        predicted = trace.predict(params, kind)
        measured = result.aggregates["acceptance_length"]
        assert measured == pytest.approx(predicted.acceptance(kind), abs=1e-9), params.label()
        for workload in ("short", "long", "coding"):
            assert result.aggregates[f"{workload}_acceptance_length"] == pytest.approx(
                predicted.acceptance(kind, workload), abs=1e-9
            ), (params.label(), workload)
