"""Acceptance length of one run, per server kind; never a cumulative figure that includes warmup.

Acceptance length = tokens committed per verify round including the bonus
token (the SGLang convention, DESIGN.md).

- ddtune: each response's `usage.spec = {rounds, accepted_tokens,
  mean_acceptance_length}`; the run's value pools the requests weighted by rounds.
- SGLang: each response's `meta_info`: completion_tokens / spec_verify_ct,
  pooled weighted by spec_verify_ct (sum of tokens / sum of verify rounds).
- vLLM: Prometheus counters `vllm:spec_decode_num_accepted_tokens_total` and
  `vllm:spec_decode_num_drafts_total` read before and after the measured
  requests: 1 + accepted/drafts over the difference.
- anything else: unavailable (None) with a note; never guessed.
"""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from ddtune.bench.client import StreamRecord

VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
VLLM_DRAFTS = "vllm:spec_decode_num_drafts"


def request_acceptance(kind: str, record: StreamRecord) -> tuple[float | None, float]:
    """(acceptance length, weight in verify rounds) of one response; (None, 0) when absent."""
    if kind == "ddtune":
        spec = (record.usage or {}).get("spec") or {}
        rounds, mean = spec.get("rounds"), spec.get("mean_acceptance_length")
        if _number(rounds) and rounds > 0 and _number(mean):
            return float(mean), float(rounds)
    if kind == "sglang":
        meta = record.meta_info or {}
        verify, tokens = meta.get("spec_verify_ct"), meta.get("completion_tokens")
        if _number(verify) and verify > 0 and _number(tokens):
            return tokens / verify, float(verify)
    return None, 0.0


def pooled_acceptance(per_request: list[tuple[float | None, float]]) -> float | None:
    """Sum of committed tokens over sum of verify rounds across requests (None if no rounds)."""
    rounds = sum(w for value, w in per_request if value is not None)
    if rounds <= 0:
        return None
    return sum(value * w for value, w in per_request if value is not None) / rounds


def parse_prometheus(text: str) -> dict[str, float]:
    """Counter samples summed over label sets, keyed by sample name (e.g. `..._total`)."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + float(sample.value)
    return totals


def scrape_metrics(client: httpx.Client, base_url: str) -> dict[str, float] | None:
    """Parsed `/metrics`, or None when the server exposes none."""
    try:
        response = client.get(f"{base_url}/metrics")
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    return parse_prometheus(response.text)


def vllm_acceptance(
    before: dict[str, float] | None, after: dict[str, float] | None
) -> tuple[float | None, str]:
    """1 + accepted/drafts over the counter differences, with a note saying why when None."""
    if before is None or after is None:
        return None, "vLLM /metrics not reachable; acceptance length unavailable"
    accepted = _counter(after, VLLM_ACCEPTED) - _counter(before, VLLM_ACCEPTED)
    drafts = _counter(after, VLLM_DRAFTS) - _counter(before, VLLM_DRAFTS)
    if accepted < 0 or drafts < 0:
        return None, "vLLM counters went down during the run (server restarted?)"
    if drafts == 0:
        return None, "vLLM reported no speculative drafts during the run (speculation off?)"
    return (
        1.0 + accepted / drafts,
        f"vLLM counters: {accepted:g} accepted tokens over {drafts:g} drafts",
    )


def _counter(samples: dict[str, float], name: str) -> float:
    """A counter's value; exposition names end in `_total`, older clients may omit it."""
    if f"{name}_total" in samples:
        return samples[f"{name}_total"]
    return samples.get(name, 0.0)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
