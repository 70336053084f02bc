"""`ReportOptions`: the knobs of the report, with defaults that suit a sweep.

A `ddtune.tables.StrictModel` (docs/report.md "How the report is built"): direct
construction with a bad value raises pydantic's `ValidationError`; user input
goes through `from_dict`, whose `UserError` names `report.<option>`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from ddtune.tables import StrictModel, parse_table

Level = Annotated[float, Field(ge=0.5, lt=1.0)]
LEVEL_KEY = re.compile(r"^(c[1-9][0-9]*|r[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?)$")


def _level_weights(weights: dict[str, float]) -> dict[str, float]:
    """`{"c1": 0.2, "c16": 0.8}`: level keys as the report names them, weights >= 0, some > 0."""
    for key, weight in weights.items():
        if not LEVEL_KEY.match(key):
            raise ValueError(
                f"{key!r} is not a load level: use c<N> (concurrency N) or r<rate> (requests/s)"
            )
        if weight < 0:
            raise ValueError(f"the weight of {key} must be >= 0")
    if weights and not any(weights.values()):
        raise ValueError("give at least one level a weight above 0")
    return weights


Interleave = Literal["trial", "request"]  # [sweep] interleave: what takes turns within a pass


class ReportOptions(StrictModel):
    title: str = "ddtune sweep report"  # the report's title
    confidence: Level = 0.95  # level of every interval in the report
    alpha: Annotated[float, Field(gt=0.0, lt=0.5)] = 0.05  # significance of the t-tests, Fisher
    power: Level = 0.80  # target power of the "passes needed" estimate
    tolerance: Annotated[float, Field(gt=0.0, lt=0.5)] = 0.03  # equivalence margin (relative)
    blocked: bool = True  # passes are blocks (interleaved order): paired analysis
    passes_per_start: Annotated[int, Field(ge=1)] = 1  # passes benched on one server start
    interleave: Interleave = "trial"  # "request": a pass's configs took turns per request
    plots: bool = True  # write PNG plots and embed them in report.html
    near_tie_gap: Annotated[float, Field(ge=0.0)] = 0.1  # nats: T=0 divergence below = near-tie
    # [bench.load] levels: the load mix to recommend for, e.g. {c1 = 0.2, c16 = 0.8}
    load_weights: Annotated[dict[str, float], AfterValidator(_level_weights)] | None = None
    # the schedule switches configs by concurrency only for at least this gain on the mix
    schedule_min_gain: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.02

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReportOptions:
        """Strict: an unknown option or a bad value is a `UserError` keyed `report.<option>`."""
        return parse_table(cls, data, where="report")
