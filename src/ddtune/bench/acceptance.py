"""Acceptance length of one run; never a cumulative figure that includes warmup.

Acceptance length = tokens committed per verify round including the bonus
token (the SGLang convention, docs/bench.md "Bench"). Where it comes
from is the server kind's business (`ddtune.engines`): per response
(`kind.response_acceptance`: ddtune `usage.spec`, SGLang `meta_info`), pooled
here by verify rounds; or from counters at `kind.metrics_path` read before and
after the measured requests (`kind.counter_acceptance`: vLLM). A kind with
neither gives None with a note; never guessed.
"""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from ddtune.engines import ServerEngine


def pooled_acceptance(per_request: list[tuple[float | None, float]]) -> float | None:
    """Sum of committed tokens over sum of verify rounds across requests (None if no rounds)."""
    rounds = sum(w for value, w in per_request if value is not None)
    if rounds <= 0:
        return None
    return sum(value * w for value, w in per_request if value is not None) / rounds


def run_acceptance(
    engine: ServerEngine,
    per_request: list[tuple[float | None, float]],
    before: dict[str, float] | None,
    after: dict[str, float] | None,
) -> tuple[float | None, str | None]:
    """(the run's acceptance length, a note or None) from the kind's source."""
    if engine.metrics_path is not None:
        return engine.counter_acceptance(before, after)
    value = pooled_acceptance(per_request)
    return value, None if value is not None else engine.no_acceptance_note


def read_counters(
    client: httpx.Client, base_url: str, engine: ServerEngine
) -> dict[str, float] | None:
    """The kind's counters now (parsed `metrics_path`); None when it has none or they fail."""
    if engine.metrics_path is None:
        return None
    try:
        response = client.get(base_url + engine.metrics_path)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    return parse_prometheus(response.text)


def parse_prometheus(text: str) -> dict[str, float]:
    """Counter samples summed over label sets, keyed by sample name (e.g. `..._total`); a
    sample with a `position` label (vLLM's per-position acceptance) also under
    `name{position=N}`, summed over its other labels."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            keys = [sample.name]
            if "position" in sample.labels:
                keys.append(f"{sample.name}{{position={sample.labels['position']}}}")
            for key in keys:
                totals[key] = totals.get(key, 0.0) + float(sample.value)
    return totals
