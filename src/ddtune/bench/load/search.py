"""`search = "max_rate"`: the highest request rate whose SLO attainment reaches the target.

Starts from the measured rate levels: `low` = the highest rate that met the
target, `high` = the lowest higher rate that did not. With no failing rate the
search doubles `low` until one fails; with no passing rate it halves the lowest
until one passes; then it bisects (geometric midpoint) between the two. Every
probe is one open-loop level run (recorded with `search = true`); at most
`probes` of them. Attainment is assumed to fall as the rate grows.
See docs/bench.md "Bench".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ddtune.bench.load.latency import LevelResult


def meets(level: LevelResult, attainment: float) -> bool:
    """The level ran and enough of its requests met every SLO."""
    return (
        level.status == "done"
        and level.slo_attainment is not None
        and level.slo_attainment >= attainment
    )


def search_max_rate(
    run_rate: Callable[[float], LevelResult],
    measured: Sequence[LevelResult],
    attainment: float,
    probes: int,
) -> dict[str, Any]:
    """{"max_rate", "upper", "attainment", "probes": [{rate, attainment, met}], "note"}."""
    seen = {float(r.rate): meets(r, attainment) for r in measured if r.rate is not None}
    trail: list[dict[str, Any]] = []

    def probe(rate: float) -> bool:
        level = run_rate(rate)
        ok = meets(level, attainment)
        seen[rate] = ok
        trail.append({"rate": rate, "attainment": level.slo_attainment, "met": ok})
        return ok

    low, high = _bracket(seen)
    for _ in range(probes):
        rate = _next_rate(low, high, seen)
        if probe(rate):
            low = rate if low is None or rate > low else low
        else:
            high = rate if high is None or rate < high else high
    return {
        "max_rate": low,
        "upper": high,
        "attainment": attainment,
        "probes": trail,
        "note": _note(low, high, attainment),
    }


def _next_rate(low: float | None, high: float | None, seen: dict[float, bool]) -> float:
    """Double past the highest pass, halve below the lowest fail, else bisect (geometric)."""
    if high is None:
        return 2 * (low if low is not None else max(seen))
    if low is None:
        return min(seen) / 2
    return math.sqrt(low * high)


def _bracket(seen: dict[float, bool]) -> tuple[float | None, float | None]:
    """(highest passing rate, lowest failing rate above it) among the rates seen."""
    passing = [rate for rate, ok in seen.items() if ok]
    low = max(passing) if passing else None
    failing = [rate for rate, ok in seen.items() if not ok and (low is None or rate > low)]
    return low, min(failing) if failing else None


def _note(low: float | None, high: float | None, attainment: float) -> str:
    target = f"{attainment:.0%} of requests within the SLO"
    if low is None:
        return f"no rate probed reached {target} (lowest tried {high:g} req/s)"
    if high is None:
        return f"every rate probed reached {target}; the highest, {low:g} req/s, is a lower bound"
    return f"{target} up to {low:.3g} req/s (fails at {high:.3g} req/s)"


__all__ = ["meets", "search_max_rate"]
