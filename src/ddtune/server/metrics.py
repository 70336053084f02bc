"""Prometheus metrics for one server app, in the app's own `CollectorRegistry`.

Counters are cumulative over the process (they include the warm-up request);
a benchmark must diff them before/after, or read per-response `usage.spec`.
The metric names are listed in docs/architecture.md "Server".
"""

from __future__ import annotations

from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

STAGES = ("draft", "tree", "verify", "commit")
ACCEPTANCE_BUCKETS = (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32)


class ServerMetrics:
    """Every metric `/metrics` exposes; safe to update from the worker thread."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "ddtune_requests",
            "HTTP generation requests by endpoint and outcome",
            ["endpoint", "outcome"],
            registry=self.registry,
        )
        self.prompt_tokens = self._counter("ddtune_prompt_tokens", "Prompt tokens")
        self.generated_tokens = self._counter(
            "ddtune_generated_tokens", "Generated (completion) tokens"
        )
        self.rounds = self._counter("ddtune_verify_rounds", "Target verify rounds")
        self.accepted_tokens = self._counter(
            "ddtune_accepted_tokens", "Accepted draft tokens (bonus tokens excluded)"
        )
        self.acceptance_length = Histogram(
            "ddtune_acceptance_length",
            "Tokens committed per verify round (bonus included)",
            buckets=ACCEPTANCE_BUCKETS,
            registry=self.registry,
        )
        self.stage_seconds = Counter(
            "ddtune_stage_seconds",
            "Seconds spent per decoding stage",
            ["stage"],
            registry=self.registry,
        )
        for stage in STAGES:
            self.stage_seconds.labels(stage=stage)
        self.queue_depth = self._gauge("ddtune_queue_depth", "Requests waiting for the worker")
        self.running = self._gauge("ddtune_running_requests", "Requests being generated")
        self.cancelled = self._counter(
            "ddtune_cancelled", "Generations cancelled (client gone or shutdown)"
        )
        self.config_generation = self._gauge(
            "ddtune_config_generation", "Hot reconfigurations applied"
        )

    def _counter(self, name: str, documentation: str) -> Counter:
        return Counter(name, documentation, registry=self.registry)

    def _gauge(self, name: str, documentation: str) -> Gauge:
        return Gauge(name, documentation, registry=self.registry)

    def observe_generation(self, prompt_tokens: int, completion_tokens: int, stats: Any) -> None:
        """Record one finished engine call (stats = the engine's GenerationStats)."""
        self.prompt_tokens.inc(prompt_tokens)
        self.generated_tokens.inc(completion_tokens)
        self.rounds.inc(stats.rounds)
        self.accepted_tokens.inc(accepted_draft_tokens(stats))
        for length in stats.acceptance_lengths:
            self.acceptance_length.observe(length)
        for stage, seconds in (stats.stage_seconds or {}).items():
            self.stage_seconds.labels(stage=stage).inc(max(0.0, float(seconds)))

    def render(self) -> bytes:
        return generate_latest(self.registry)


def accepted_draft_tokens(stats: Any) -> int:
    """Draft tokens accepted by verification: each round's length minus its bonus token."""
    return int(sum(max(0, int(length) - 1) for length in stats.acceptance_lengths))


def completion_tokens(result: Any) -> int:
    """Tokens generated, counted as vLLM counts them: a stop token (EOS or one of
    `stop_token_ids`) counts although it is not in the text; a stop string's own
    tokens do not (the engine keeps the tokens that end before it)."""
    return len(result.token_ids) + (getattr(result, "stop_token", None) is not None)
