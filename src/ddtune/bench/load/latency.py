"""Per-request latency figures, percentiles, SLO checks and goodput of one load level.

Per request (times from the request's scheduled send; an open-loop request
the client could not send on time carries that lag in its figures):
  ttft_s        time to the first non-empty chunk
  e2e_s         time to the end of the stream
  chunk_gaps_s  every gap between consecutive non-empty chunks
  itl_s         per-token gaps: a gap that carried k tokens counts k times as gap/k.
                k comes from the stream when it reports cumulative counts (SGLang
                `meta_info`), else the request's tokens are spread evenly over its
                chunks (largest remainder)
  tpot_s        (e2e - ttft) / (output tokens - 1)
  itl_p99_s     the request's own p99 per-token gap (what `itl_p99_s` SLOs check)

A request meets the SLO when it did not fail and every given target holds
(ttft <= ttft_p99_s, its own p99 gap <= itl_p99_s, e2e <= e2e_p99_s); the
level's attainment is the fraction of its measured requests that do, and its
goodput the requests/s and output tok/s of those requests. Percentiles use
linear interpolation between order statistics (numpy's default).

A level is `serialised` when on average >= 1.5 requests were in flight (sum
of e2e over the window) but they streamed one at a time (`generating_at_once`
<= 1.15): the server queues requests instead of batching them, so latency that
grows with load is queueing, not a property of the decoding config.
See docs/bench.md "Bench".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

SERIAL_IN_FLIGHT = 1.5  # mean requests in flight above this ...
SERIAL_PARALLELISM = 1.15  # ... while at most this many generate at once: serialised
QUANTILES = (50, 90, 99)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation; ValueError when empty."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Distribution:
    n: int
    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution | None:
        if not values:
            return None
        p50, p90, p99 = (percentile(values, q) for q in QUANTILES)
        return cls(len(values), math.fsum(values) / len(values), p50, p90, p99)


def per_token_gaps(
    chunk_times: Sequence[float], chunk_tokens: Sequence[int], output_tokens: int
) -> list[float]:
    """Per-token inter-token latencies of one request (see the module docstring)."""
    gaps = [b - a for a, b in zip(chunk_times, chunk_times[1:], strict=False)]
    if not gaps:
        return []
    if len(chunk_tokens) == len(chunk_times):
        carried = [max(1, b - a) for a, b in zip(chunk_tokens, chunk_tokens[1:], strict=False)]
    else:
        carried = spread_tokens(output_tokens, len(chunk_times))[1:]
    return [gap / k for gap, k in zip(gaps, carried, strict=True) for _ in range(k)]


def spread_tokens(tokens: int, chunks: int) -> list[int]:
    """`tokens` over `chunks` as evenly as integers allow (largest remainder, >= 1 each)."""
    share = max(tokens, chunks) / chunks
    counts = [math.floor(share * (i + 1)) - math.floor(share * i) for i in range(chunks)]
    return [max(1, c) for c in counts]


def request_figures(
    ttft_s: float | None,
    e2e_s: float,
    chunk_times: Sequence[float],
    chunk_tokens: Sequence[int],
    output_tokens: int,
    lag_s: float = 0.0,
) -> dict[str, Any]:
    """The latency fields of one request row (`lag_s` added to TTFT and e2e)."""
    itl = per_token_gaps(chunk_times, chunk_tokens, output_tokens)
    gaps = [b - a for a, b in zip(chunk_times, chunk_times[1:], strict=False)]
    decode = e2e_s - ttft_s if ttft_s is not None else None
    return {
        "ttft_s": None if ttft_s is None else ttft_s + lag_s,
        "e2e_s": e2e_s + lag_s,
        "lag_s": lag_s,
        "output_tokens": output_tokens,
        "chunks": len(chunk_times),
        "chunk_gaps_s": [round(g, 6) for g in gaps],
        "itl_s": [round(g, 6) for g in itl],
        "itl_p99_s": percentile(itl, 99) if itl else None,
        "tpot_s": decode / (output_tokens - 1)
        if decode is not None and output_tokens > 1
        else None,
    }


def meets_slo(row: dict[str, Any], targets: dict[str, float]) -> bool:
    """A request meets the SLO when it succeeded and every given target holds."""
    if row.get("error") or row.get("ttft_s") is None:
        return False
    checks = {"ttft": row["ttft_s"], "e2e": row["e2e_s"], "itl": row.get("itl_p99_s")}
    return all(checks[name] is None or checks[name] <= limit for name, limit in targets.items())


@dataclass
class LevelResult:
    """The figures of one load level of one bench run (JSON: `to_dict` / `from_dict`)."""

    key: str  # "c4" | "r0.5"
    loop: str  # "closed" | "open"
    concurrency: int | None
    rate: float | None
    status: str = "done"  # "failed": every measured request failed (`error` says why)
    error: str | None = None
    search: bool = False  # a probe of the max-rate search, not a level of the matrix
    requests: int = 0  # measured requests
    failed: int = 0
    warmup: int = 0
    window_s: float | None = None
    output_tps: float | None = None  # aggregate output tokens / window
    request_rate: float | None = None  # completed requests / window
    ttft_s: Distribution | None = None
    itl_s: Distribution | None = None
    itl_chunk_s: Distribution | None = None
    tpot_s: Distribution | None = None
    e2e_s: Distribution | None = None
    output_tokens: Distribution | None = None
    acceptance_length: float | None = None
    slo_attainment: float | None = None  # None: no [bench.slo]
    slo_met: bool | None = None
    goodput_rps: float | None = None
    goodput_tps: float | None = None
    in_flight: float | None = None  # mean requests in flight (sum of e2e / window)
    parallelism: float | None = None  # requests streaming at once (`generating_at_once`)
    serialised: bool = False
    max_lag_s: float = 0.0
    client_cpu_s: float | None = None
    client_cpu_share: float | None = None  # of one core, over the level's wall time
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LevelResult:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for name in ("ttft_s", "itl_s", "itl_chunk_s", "tpot_s", "e2e_s", "output_tokens"):
            if isinstance(values.get(name), dict):
                values[name] = Distribution(**values[name])
        return cls(**values)


def summarize_level(
    result: LevelResult, rows: list[dict[str, Any]], slo: dict[str, float] | None
) -> LevelResult:
    """Fill `result` from its measured request rows (warm-up rows excluded by the caller)."""
    ok = [r for r in rows if not r.get("error")]
    result.requests, result.failed = len(rows), len(rows) - len(ok)
    if not ok:
        errors = [r["error"] for r in rows if r.get("error")]
        result.status = "failed"
        result.error = errors[0] if errors else "no request was measured"
        return result
    start = min(r["sent_s"] for r in rows)
    end = max(r["sent_s"] + r["e2e_s"] for r in rows)
    window = max(end - start, 1e-9)
    tokens = sum(r["output_tokens"] for r in ok)
    result.window_s, result.output_tps = window, tokens / window
    result.request_rate = len(ok) / window
    _distributions(result, ok)
    result.in_flight = sum(r["e2e_s"] - r["lag_s"] for r in ok) / window
    result.parallelism = generating_at_once(ok)
    result.serialised = (
        result.in_flight >= SERIAL_IN_FLIGHT
        and result.parallelism is not None
        and result.parallelism <= SERIAL_PARALLELISM
    )
    result.max_lag_s = max(r["lag_s"] for r in rows)
    if slo:
        _goodput(result, rows, window)
    if result.failed:
        result.notes.append(f"{result.failed} of {len(rows)} requests failed: {_first_error(rows)}")
    return result


def _goodput(result: LevelResult, rows: list[dict[str, Any]], window: float) -> None:
    good = [r for r in rows if r.get("meets_slo")]
    result.slo_attainment = len(good) / len(rows)
    result.goodput_rps = len(good) / window
    result.goodput_tps = sum(r["output_tokens"] for r in good) / window


def generating_at_once(rows: list[dict[str, Any]]) -> float | None:
    """Mean number of requests streaming while any one is: sum of the spans from first
    token to end over the length of their union. A server that serialises requests
    streams one at a time (1.0) however many wait; a batching one streams several."""
    spans = sorted(
        (r["sent_s"] + r["ttft_s"], r["sent_s"] + r["e2e_s"])
        for r in rows
        if r["ttft_s"] is not None and r["e2e_s"] > r["ttft_s"]
    )
    if not spans:
        return None
    union, (start, end) = 0.0, spans[0]
    for a, b in spans[1:]:
        if a > end:
            union, start = union + end - start, a
        end = max(end, b)
    union += end - start
    return sum(b - a for a, b in spans) / union if union > 0 else None


def _distributions(result: LevelResult, ok: list[dict[str, Any]]) -> None:
    result.ttft_s = Distribution.of([r["ttft_s"] for r in ok if r["ttft_s"] is not None])
    result.e2e_s = Distribution.of([r["e2e_s"] for r in ok])
    result.itl_s = Distribution.of([g for r in ok for g in r["itl_s"]])
    result.itl_chunk_s = Distribution.of([g for r in ok for g in r["chunk_gaps_s"]])
    result.tpot_s = Distribution.of([r["tpot_s"] for r in ok if r["tpot_s"] is not None])
    result.output_tokens = Distribution.of([float(r["output_tokens"]) for r in ok])


def _first_error(rows: list[dict[str, Any]]) -> str:
    return next((str(r["error"]) for r in rows if r.get("error")), "")


__all__ = [
    "Distribution",
    "LevelResult",
    "generating_at_once",
    "meets_slo",
    "per_token_gaps",
    "percentile",
    "request_figures",
    "spread_tokens",
    "summarize_level",
]
