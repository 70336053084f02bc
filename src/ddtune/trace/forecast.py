"""What a trace says of a sweep's configs before anything runs (`Forecast`), checked against the sweep.

    check_requests(trace, matrix)                       # recorded for this bench's requests?
    forecast = build_forecast(trace, {label: params}, get_engine("ddtune"))
    forecast.shapes[label]["short"]                     # costs.Shape: tokens a round, ...
    forecast.acceptance[label]                          # τ as the service's kind reports it
    forecast.dominates(a, b)                            # a never slower than b, whatever a round costs

A trace predicts a sweep only for the requests its bench sends and the models
its service serves: `check_requests` refuses a trace of other requests, and
`identity_mismatch` names a served model whose weights differ from the
traced ones (a ddtune server reports their sha256). See docs/sweeps.md
"Predict, then confirm".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ddtune.bench.matrix import BenchMatrix
from ddtune.engines import ServerEngine
from ddtune.errors import UserError
from ddtune.params import DecodeParams, window_to_wire
from ddtune.report.summarize import cost_key
from ddtune.trace.binding import traced_identity
from ddtune.trace.ngram import ngram_rule, ngram_shapes, paths_of_bench, predict_ngram
from ddtune.trace.predict import Trace
from ddtune.trace.round_cost import Shape
from ddtune.trace.sources import requests_from_matrix


@dataclass(frozen=True)
class Forecast:
    """What the trace says of every config before anything runs. A sweep stores it
    (`to_json`) when it is created, so a resumed sweep or its report replays the same
    decisions whatever becomes of the trace folder."""

    shapes: Mapping[str, Mapping[str, Shape]]  # label -> workload -> shape
    acceptance: Mapping[str, float | None]  # label -> τ as the service counts it, all requests
    cost: Callable[[str], Any]  # the report's "cheaper" order
    objective: str = "throughput"
    weights: Mapping[str, str | None] = field(default_factory=dict)  # `binding.traced_identity`
    source: str = ""  # the trace folder
    # label -> what its prediction comes from (a trace's window: each recorded on its own);
    # a measured miss corrects its group's predictions (`sweep/plan/races/predicting.py`)
    groups: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "shapes": {
                    x: {w: asdict(s) for w, s in by.items()} for x, by in self.shapes.items()
                },
                "acceptance": dict(self.acceptance),
                "objective": self.objective,
                "weights": dict(self.weights),
                "source": self.source,
                "groups": dict(self.groups),
            }
        )

    @classmethod
    def from_json(cls, text: str, cost: Callable[[str], Any]) -> Forecast:
        data = json.loads(text)
        shapes = {x: {w: Shape(**s) for w, s in by.items()} for x, by in data["shapes"].items()}
        return cls(
            shapes,
            data["acceptance"],
            cost,
            data["objective"],
            data["weights"],
            data["source"],
            data.get("groups") or {},  # a forecast stored before groups: one group each
        )

    def group(self, label: str) -> str:
        """What `label`'s prediction comes from (its own group when the forecast says none)."""
        return self.groups.get(label, label)

    def dominates(self, a: str, b: str) -> bool:
        """Is `a` never slower than `b`, whatever a round costs? (a round never costs less
        with more verify tokens or a wider window: `costs.py`)"""
        sa, sb = self.shapes[a], self.shapes[b]
        if a == b or set(sa) != set(sb) or any(sa[w].mode != sb[w].mode for w in sa):
            return False
        cheaper = all(
            x <= y for w in sa for x, y in zip(sa[w].features(w), sb[w].features(w), strict=True)
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
    engine: ServerEngine,
    objective: str = "throughput",
) -> Forecast:
    """Every config's shapes and acceptance; a UserError names what the trace cannot answer."""
    shapes, acceptance = {}, {}
    for label, params in configs.items():
        shapes[label] = trace.shapes(params, engine)
        acceptance[label] = trace.predict(params, engine).acceptance(engine)
    weights = traced_identity(trace.header)
    groups = {label: f"window {window_to_wire(p.window)}" for label, p in configs.items()}
    cost = config_cost(configs)
    return Forecast(shapes, acceptance, cost, objective, weights, str(trace.folder), groups)


def paths_forecast(
    token_paths: Sequence[Mapping[str, Any]],
    configs: Mapping[str, DecodeParams],
    objective: str = "throughput",
) -> Forecast:
    """What one T = 0 run's greedy paths (`[bench] token_paths` of the baseline) say of every
    n-gram config, exactly (`ngram.py`), and of plain decoding; configs of other methods are
    left out (they race unpredicted). One group: every prediction reads the same paths."""
    paths = paths_of_bench(token_paths)
    context = next((p.get("context") for p in token_paths if p.get("context")), None)
    longest = max((len(p.tokens) for p in paths), default=0)
    max_model_len = int(context or longest + 1)
    shapes: dict[str, dict[str, Shape]] = {}
    acceptance: dict[str, float | None] = {}  # pooled as the counters pool: over every draft
    for label, params in configs.items():
        rule = ngram_rule(params, max_model_len)
        if rule is not None:
            counts = predict_ngram(paths, rule)
            shapes[label], acceptance[label] = ngram_shapes(counts), counts["all"].tau or 1.0
        elif params.mode == "ar" and params.method in (None, "ar"):
            workloads = {p.workload for p in paths}
            shapes[label] = {w: Shape("ar", 1.0, 1, 0.0, None) for w in sorted(workloads)}
            acceptance[label] = None
    groups = dict.fromkeys(shapes, "the baseline's answers")
    source = "the baseline's T = 0 answers"
    return Forecast(shapes, acceptance, config_cost(configs), objective, {}, source, groups)


def config_cost(configs: Mapping[str, DecodeParams]) -> Callable[[str], Any]:
    """The report's "cheaper" order of the labelled configs (`cost_key`, then the label)."""
    return lambda label: (cost_key(configs[label]), label)


def identity_mismatch(forecast: Forecast, identity: Mapping[str, Any]) -> str | None:
    """Why the served models are not the traced ones (None: they are, or it cannot tell):
    the weights' sha256 a ddtune server reports, else the model folder a vLLM or SGLang
    server names (`models`, `server_info.model_path`), by folder name."""
    for side in ("target", "drafter"):
        served, traced = identity.get(f"{side}_sha256"), forecast.weights.get(side)
        if served and traced and served != traced:
            return (
                f"the service serves a {side} with sha256 {served[:12]}..., the trace "
                f"{forecast.source} was recorded with {traced[:12]}..."
            )
        traced_path = forecast.weights.get(f"{side}_path")
        for path in reported_paths(identity, side):
            if traced_path and Path(path).name != Path(traced_path).name:
                return (
                    f"the service reports the {side} {path}, the trace {forecast.source} "
                    f"was recorded with {traced_path}"
                )
    return None


def reported_paths(identity: Mapping[str, Any], side: str) -> list[str]:
    """Model folders a server names for `side` (served names that are not paths are left out:
    an alias says nothing of the folder)."""
    info = identity.get("server_info")
    info = info if isinstance(info, dict) else {}
    if side == "target":
        found = [*(identity.get("models") or []), info.get("model_path")]
    else:
        found = [info.get("speculative_draft_model_path")]
    return [p for p in found if isinstance(p, str) and "/" in p]


__all__ = ["Forecast", "build_forecast", "check_requests", "config_cost", "identity_mismatch"]
