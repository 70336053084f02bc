"""`openai`: any OpenAI-compatible server, and the wire the ddtune and vLLM kinds share.

    health      service.health_url, else GET /v1/models
    identity    none from the server: the controller's process checks only
    generate    POST /v1/completions, `stream: true`, `stream_options.include_usage`
                (the last chunk carries `usage`); `ignore_eos` only where the kind takes it
    acceptance  none: a generic server reports no speculation stats

See docs/architecture.md "Kinds".
"""

from __future__ import annotations

from typing import Any, ClassVar

from ddtune.kinds.base import ServerKind, StreamChunk
from ddtune.params import SamplingParams


class OpenAIKind(ServerKind):
    """A generic OpenAI-compatible server; the base of the ddtune and vLLM kinds."""

    name = "openai"
    accepts_ignore_eos: ClassVar[bool] = False  # the `ignore_eos` extension (not OpenAI's)
    no_acceptance_note = (
        "acceptance length unavailable: a generic OpenAI server reports no speculation stats"
    )

    def generate_request(
        self, base_url: str, prompt: str, sampling: SamplingParams, model: str | None
    ) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "prompt": prompt,
            "max_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if sampling.top_p != 1.0:
            body["top_p"] = sampling.top_p
        if model is not None:
            body["model"] = model
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.stop_strings:
            body["stop"] = list(sampling.stop_strings)
        if sampling.ignore_eos and self.accepts_ignore_eos:
            body["ignore_eos"] = True
        return f"{base_url}/v1/completions", body

    def parse_chunk(self, payload: dict[str, Any], text_so_far: str) -> StreamChunk:
        choices = payload.get("choices") or []
        first = choices[0] if choices and isinstance(choices[0], dict) else {}
        return StreamChunk(
            text=first.get("text") or "",
            finish_reason=first.get("finish_reason") or None,
            usage=payload.get("usage") or None,
            fingerprint=payload.get("system_fingerprint") or None,
        )
