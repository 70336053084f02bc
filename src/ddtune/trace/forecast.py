"""What a trace says of a sweep's configs before anything runs (`Forecast`), checked against the sweep.

    check_requests(trace, matrix)                       # recorded for this bench's requests?
    forecast = build_forecast(trace, {label: params}, get_kind("ddtune"))
    forecast.shapes[label]["short"]                     # costs.Shape: tokens a round, ...
    forecast.acceptance[label]                          # τ as the service's kind reports it
    forecast.dominates(a, b)                            # a never slower than b, whatever a round costs

A trace predicts a sweep only for the requests its bench sends and the models
its service serves: `check_requests` refuses a trace of other requests, and
`identity_mismatch` names a served model whose weights differ from the
traced ones (a ddtune server reports their sha256). See docs/architecture.md
"Predict, then confirm".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ddtune.bench.matrix import BenchMatrix
from ddtune.errors import UserError
from ddtune.kinds import ServerKind
from ddtune.params import DecodeParams
from ddtune.report.summarize import cost_key
from ddtune.trace.costs import Shape
from ddtune.trace.predict import Trace
from ddtune.trace.sources import requests_from_matrix


@dataclass(frozen=True)
class Forecast:
    """What the trace says of every config before anything runs."""

    shapes: Mapping[str, Mapping[str, Shape]]  # label -> workload -> shape
    acceptance: Mapping[str, float | None]  # label -> τ as the service counts it, all requests
    cost: Callable[[str], Any]  # the report's "cheaper" order
    objective: str = "throughput"

    def dominates(self, a: str, b: str) -> bool:
        """Is `a` never slower than `b`, whatever a round costs? (a round never costs less
        with more verify tokens or a wider window: `costs.py`)"""
        sa, sb = self.shapes[a], self.shapes[b]
        if a == b or set(sa) != set(sb) or any(sa[w].mode != sb[w].mode for w in sa):
            return False
        cheaper = all(
            x <= y for w in sa for x, y in zip(sa[w].features(), sb[w].features(), strict=True)
        )
        faster = all(sa[w].tokens_per_round >= sb[w].tokens_per_round for w in sa)
        same = all(sa[w] == sb[w] for w in sa)
        return cheaper and faster and (not same or self.cost(a) < self.cost(b))


def check_requests(trace: Trace, matrix: BenchMatrix, where: str = "sweep.trace") -> None:
    """A UserError unless the trace holds exactly the requests a bench of `matrix` sends."""
    if matrix.temperature != 0:
        return  # nothing is predicted above T = 0 (the sweep says so and races)
    wanted, _ = requests_from_matrix(matrix)
    recorded = trace.header.requests
    keys = [r.traced("").model_dump(exclude={"key"}) for r in wanted]
    have = [r.model_dump(exclude={"key"}) for r in recorded]
    if keys != have:
        differ = sum(a != b for a, b in zip(keys, have, strict=False)) + abs(len(keys) - len(have))
        raise UserError(
            f"{where}: {trace.folder} was recorded for other requests than this spec's bench "
            f"sends ({len(have)} traced, {len(keys)} sent, {differ} differ); record it again "
            f"with `ddtune trace record --spec SPEC --out {trace.folder} --fresh`",
            key=where,
        )


def build_forecast(
    trace: Trace,
    configs: Mapping[str, DecodeParams],
    kind: ServerKind,
    objective: str = "throughput",
) -> Forecast:
    """Every config's shapes and acceptance; a UserError names what the trace cannot answer."""
    shapes, acceptance = {}, {}
    for label, params in configs.items():
        shapes[label] = trace.shapes(params, kind)
        acceptance[label] = trace.predict(params, kind).acceptance(kind)
    return Forecast(shapes, acceptance, lambda x: (cost_key(configs[x]), x), objective)


def identity_mismatch(trace: Trace, identity: Mapping[str, Any]) -> str | None:
    """Why the served models are not the traced ones (None: they are, or it cannot tell)."""
    for side, key in (("target", "target_sha256"), ("drafter", "drafter_sha256")):
        served, traced = identity.get(key), getattr(trace.header, side).sha256
        if served and traced and served != traced:
            return (
                f"the service serves a {side} with sha256 {served[:12]}..., the trace's "
                f"{getattr(trace.header, side).path} has {traced[:12]}..."
            )
    return None


__all__ = ["Forecast", "build_forecast", "check_requests", "identity_mismatch"]
