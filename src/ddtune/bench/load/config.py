"""`[bench.load]` and `[bench.slo]`: the load levels of a bench run and the latency targets.

    [bench.load]
    concurrency = [1, 4, 16]   # closed loop: N clients, each sends its next request when
                               # the previous one finished
    rate = [0.5, 1, 2]         # open loop: seeded Poisson arrivals, requests per second
    requests = 32              # measured requests per level (or duration_s = 60)
    warmup_requests = 4        # per level, sent at the level's load, excluded (default:
                               # one per client, or one second of arrivals)
    workload = "short"         # prompts (and max_tokens) of bench.short | long | mixed, or
                               # "traffic": the sampled requests of bench.traffic_file
    search = "max_rate"        # bisect the highest rate meeting the SLO (needs [bench.slo])
    slo_attainment = 0.99      # fraction of requests that must meet every SLO
    [bench.slo]
    ttft_p99_s = 1.0           # any subset of the three
    itl_p99_s = 0.2
    e2e_p99_s = 10.0

Bad input is a `UserError` with the key path (`ddtune.tables`): a level <= 0
(`bench.load.concurrency.0`), neither levels given (`bench.load`), an SLO
without a load level (`bench.slo`), `search` without an SLO
(`bench.load.search`). See docs/bench.md "Bench".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from ddtune.tables import StrictModel

PositiveInt = Annotated[int, Field(gt=0)]
PositiveFloat = Annotated[float, Field(gt=0)]
Workload = Literal["short", "long", "mixed", "traffic"]
DEFAULT_REQUESTS = 32


def cross_key_error(model: str, loc: tuple[str, ...], message: str, value: Any) -> ValidationError:
    """A validation error placed at `loc` (a model validator's own errors have no key)."""
    detail = InitErrorDetails(type=PydanticCustomError("cross_key", message), loc=loc, input=value)
    return ValidationError.from_exception_data(model, [detail])


class LoadTable(StrictModel):
    """`[bench.load]`: closed-loop concurrency levels and/or open-loop rates."""

    concurrency: list[PositiveInt] = []  # closed-loop levels: requests kept in flight
    rate: list[PositiveFloat] = []  # requests per second
    requests: PositiveInt | None = None  # measured per level (default DEFAULT_REQUESTS)
    duration_s: PositiveFloat | None = None  # or: send measured requests for this long
    # requests per level before measuring
    warmup_requests: Annotated[int, Field(ge=0)] | None = None
    workload: Workload = "short"  # which workload's prompts the load uses
    seed: int | None = None  # arrivals and prompt order; None: bench.seed
    max_in_flight: Annotated[int, Field(gt=0, le=4096)] = 256  # open loop: client cap
    # "max_rate": search the highest rate that meets the SLOs
    search: Literal["max_rate"] | None = None
    # share of requests that must meet the SLOs
    slo_attainment: Annotated[float, Field(gt=0.0, le=1.0)] = 0.99
    search_probes: Annotated[int, Field(ge=1, le=20)] = 6  # rates the search tries

    @model_validator(mode="after")
    def _levels(self) -> LoadTable:
        if not self.concurrency and not self.rate:
            raise cross_key_error(
                "LoadTable",
                (),
                "give concurrency = [...] (closed loop) and/or rate = [...] (open loop)",
                {},
            )
        if self.requests is not None and self.duration_s is not None:
            raise cross_key_error(
                "LoadTable",
                ("duration_s",),
                "give either requests or duration_s per level, not both",
                self.duration_s,
            )
        if self.search is not None and not self.rate:
            raise cross_key_error(
                "LoadTable",
                ("search",),
                "search = 'max_rate' starts from the rate levels; give rate = [...]",
                self.search,
            )
        return self

    def levels(self) -> list[LoadLevel]:
        """Every level in run order: closed loop by concurrency, then open loop by rate."""
        closed = [LoadLevel("closed", c, None) for c in sorted(set(self.concurrency))]
        return closed + [LoadLevel.open(r) for r in sorted(set(self.rate))]

    def warmup_for(self, level: LoadLevel) -> int:
        """Warm-up requests of a level: as given, else one per client / one second of arrivals."""
        if self.warmup_requests is not None:
            return self.warmup_requests
        if level.concurrency is not None:
            return level.concurrency
        return max(1, math.ceil(level.rate or 1.0))

    def measured_requests(self) -> int | None:
        """Requests measured per level; None when the level runs for `duration_s`."""
        if self.duration_s is not None:
            return None
        return self.requests or DEFAULT_REQUESTS


class SloTable(StrictModel):
    """`[bench.slo]`: a request meets the SLO when each given figure is within its target."""

    ttft_p99_s: PositiveFloat | None = None  # time to first token target, seconds
    itl_p99_s: PositiveFloat | None = None  # the request's own p99 per-token gap
    e2e_p99_s: PositiveFloat | None = None  # whole-request latency target, seconds

    @model_validator(mode="after")
    def _some(self) -> SloTable:
        if self.targets() == {}:
            raise cross_key_error(
                "SloTable", (), "give at least one of ttft_p99_s, itl_p99_s, e2e_p99_s", {}
            )
        return self

    def targets(self) -> dict[str, float]:
        """{"ttft": s, "itl": s, "e2e": s} for the targets given."""
        values = {"ttft": self.ttft_p99_s, "itl": self.itl_p99_s, "e2e": self.e2e_p99_s}
        return {k: v for k, v in values.items() if v is not None}


@dataclass(frozen=True)
class LoadLevel:
    """One level: closed loop at `concurrency` clients, or open loop at `rate` requests/s."""

    loop: Literal["closed", "open"]
    concurrency: int | None
    rate: float | None

    @property
    def key(self) -> str:
        """`c4` (concurrency 4) or `r0.5` (0.5 requests/s): the level's name everywhere."""
        return f"c{self.concurrency}" if self.concurrency is not None else f"r{self.rate:g}"

    @classmethod
    def open(cls, rate: float) -> LoadLevel:
        return cls("open", None, float(rate))


def check_load_tables(load: LoadTable | None, slo: SloTable | None) -> None:
    """The checks across `[bench.load]` and `[bench.slo]` (raised at the right key)."""
    if slo is not None and load is None:
        raise cross_key_error(
            "BenchMatrix",
            ("slo",),
            "an SLO needs load levels: add [bench.load] with concurrency or rate",
            slo.model_dump(exclude_none=True),
        )
    if load is not None and load.search is not None and slo is None:
        raise cross_key_error(
            "BenchMatrix",
            ("load", "search"),
            "search = 'max_rate' needs an SLO: add [bench.slo] with ttft_p99_s, itl_p99_s or e2e_p99_s",
            load.search,
        )


__all__ = ["DEFAULT_REQUESTS", "LoadLevel", "LoadTable", "SloTable", "check_load_tables"]
