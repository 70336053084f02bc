"""Prometheus metrics for one server app, in the app's own `CollectorRegistry`.

Counters are cumulative over the process (they include the warm-up request);
a benchmark must diff them before/after, or read per-response `usage.spec`.
The metric names are listed in docs/server.md "Server".
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
BATCH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
TOKEN_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
QUEUE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


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
        self.batch_size = self._histogram(
            "ddtune_batch_size", "Requests in one batched round", BATCH_BUCKETS
        )
        self.verify_tokens = self._histogram(
            "ddtune_verify_tokens",
            "Tokens verified per target forward (trees + roots, padding excluded)",
            TOKEN_BUCKETS,
        )
        self.padded_tokens = self._counter(
            "ddtune_verify_padding_tokens", "Padding tokens in batched verify forwards"
        )
        self.queue_seconds = self._histogram(
            "ddtune_queue_seconds", "Seconds a request waited before it was admitted", QUEUE_BUCKETS
        )

    def _counter(self, name: str, documentation: str) -> Counter:
        return Counter(name, documentation, registry=self.registry)

    def _gauge(self, name: str, documentation: str) -> Gauge:
        return Gauge(name, documentation, registry=self.registry)

    def _histogram(self, name: str, documentation: str, buckets: tuple[float, ...]) -> Histogram:
        return Histogram(name, documentation, buckets=buckets, registry=self.registry)

    def observe_round(self, report: Any) -> None:
        """Record one batched round (report = the engine's RoundReport)."""
        self.batch_size.observe(report.rows)
        self.verify_tokens.observe(report.verify_tokens)
        self.padded_tokens.inc(max(0, report.padded_tokens - report.verify_tokens))

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
