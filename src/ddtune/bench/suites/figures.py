"""Per-workload figures of one bench, and the tok/s of the stated traffic mix.

A sample belongs to the workload it was sent for (`humaneval`, `traffic`, ...);
the bundled short, long and coding requests together are `bundled`. Per
workload: mean decode tok/s, TTFT, e2e and ITL, acceptance pooled by verify
rounds, requests, the tokens the server counted, and passed / total where
scored (`ddtune.records.WORKLOAD_METRICS`).

The mix (`[bench] mix`, default: every workload alike) is a share of generated
tokens, so its tok/s is the weighted harmonic mean of the workloads' tok/s:
the time a server needs for the mix is the sum of each share's time.
"""

from __future__ import annotations

from collections.abc import Mapping
from statistics import fmean
from typing import Any

from ddtune.bench.acceptance import pooled_acceptance
from ddtune.bench.result import pooled_decode_rate
from ddtune.bench.suites.names import BUNDLED, WORKLOAD_NAMES

BUNDLED_WORKLOADS = ("short", "long", "coding")

Figures = dict[str, float | int | None]


def workload_of(sample: Mapping[str, Any]) -> str:
    workload = str(sample["workload"])
    return BUNDLED if workload in BUNDLED_WORKLOADS else workload


def workload_figures(
    samples: list[dict[str, Any]], per_request: list[tuple[float | None, float]]
) -> dict[str, Figures]:
    """workload -> figures, in the order of `WORKLOAD_NAMES`, for every workload sent."""
    groups: dict[str, list[int]] = {}
    for i, sample in enumerate(samples):
        groups.setdefault(workload_of(sample), []).append(i)
    return {
        name: _figures(
            [samples[i] for i in groups[name]], [per_request[i] for i in groups[name]], samples
        )
        for name in WORKLOAD_NAMES
        if name in groups
    }


def mix_tps(figures: Mapping[str, Figures], weights: Mapping[str, float] | None) -> float | None:
    """tok/s of the mix: Σ w / Σ (w / tps) over the weighted workloads (None if one lacks tps)."""
    shares = dict(weights) if weights else {name: 1.0 for name in figures}
    total, time = 0.0, 0.0
    for name, weight in shares.items():
        tps = (figures.get(name) or {}).get("tps")
        if not tps or tps <= 0:
            return None
        total, time = total + weight, time + weight / tps
    return total / time if time > 0 else None


def _figures(
    rows: list[dict[str, Any]],
    acceptance: list[tuple[float | None, float]],
    bench: list[dict[str, Any]],
) -> Figures:
    scored = [r["passed"] for r in rows if r.get("passed") is not None]
    return {
        "tps": pooled_decode_rate(rows, bench),
        "ttft_s": _mean(r["ttft_s"] for r in rows),
        "e2e_s": _mean(r["e2e_s"] for r in rows),
        "itl_s": _mean(r["itl_s"] for r in rows),
        "acceptance_length": pooled_acceptance(acceptance),
        "requests": len(rows),
        "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in rows),
        "output_tokens": sum(r["output_tokens"] or 0 for r in rows),
        "passed": sum(bool(p) for p in scored) if scored else None,
        "total": len(scored) if scored else None,
    }


def _mean(values: Any) -> float | None:
    present = [v for v in values if v is not None]
    return fmean(present) if present else None
