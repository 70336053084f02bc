"""`openai`: any OpenAI-compatible server, and the wire the ddtune and vLLM engines share.

    health      service.health_url, else GET /v1/models
    identity    none from the server: the controller's process checks only
    generate    POST /v1/completions, `stream: true`, `stream_options.include_usage`
                (the last chunk carries `usage`); `ignore_eos` only where the engine takes it;
                chats (bench suites) POST /v1/chat/completions the same way, and a logged
                request (`bench.traffic_file`) is replayed at its own endpoint with its own
                fields, only `model`, `stream` and `stream_options` set
    acceptance  none: a generic server reports no speculation stats

See docs/readiness.md "Engines".
"""

from __future__ import annotations

from typing import Any, ClassVar

from ddtune.engines.base import ServerEngine, StreamChunk
from ddtune.params import SamplingParams


class OpenAIEngine(ServerEngine):
    """A generic OpenAI-compatible server; the base of the ddtune and vLLM engines."""

    name = "openai"
    accepts_ignore_eos: ClassVar[bool] = False  # the `ignore_eos` extension (not OpenAI's)
    no_acceptance_note = (
        "acceptance length unavailable: a generic OpenAI server reports no speculation stats"
    )

    def generate_request(
        self, base_url: str, prompt: str, sampling: SamplingParams, model: str | None
    ) -> tuple[str, dict[str, Any]]:
        return f"{base_url}/v1/completions", self._body({"prompt": prompt}, sampling, model)

    def chat_request(
        self,
        base_url: str,
        messages: list[list[str]],
        sampling: SamplingParams,
        model: str | None,
    ) -> tuple[str, dict[str, Any]]:
        turns = [{"role": role, "content": content} for role, content in messages]
        return f"{base_url}/v1/chat/completions", self._body({"messages": turns}, sampling, model)

    def replay_request(
        self, base_url: str, body: dict[str, Any], model: str | None
    ) -> tuple[str, dict[str, Any]]:
        endpoint = "/v1/chat/completions" if "messages" in body else "/v1/completions"
        replayed = {**body, "stream": True, "stream_options": {"include_usage": True}}
        if model is not None:
            replayed["model"] = model
        return base_url + endpoint, replayed

    def _body(
        self, prompt: dict[str, Any], sampling: SamplingParams, model: str | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            **prompt,
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
        return body

    def ids_request(
        self, base_url: str, prompt: str | list[int], sampling: SamplingParams, model: str | None
    ) -> tuple[str, dict[str, Any]]:
        """(URL, JSON body) of one non-streamed completion answering with the token ids it
        read and wrote (`returns_token_ids` kinds); `prompt`: text or token ids."""
        body = self._body({"prompt": prompt}, sampling, model)
        body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        return f"{base_url}/v1/completions", {**body, "stream": False, "return_token_ids": True}

    def parse_chunk(self, payload: dict[str, Any], text_so_far: str) -> StreamChunk:
        """A completions chunk (`choices[0].text`) or a chat chunk (`choices[0].delta.content`)."""
        choices = payload.get("choices") or []
        first = choices[0] if choices and isinstance(choices[0], dict) else {}
        delta = first.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        return StreamChunk(
            text=first.get("text") or (content if isinstance(content, str) else ""),
            finish_reason=first.get("finish_reason") or None,
            usage=payload.get("usage") or None,
            fingerprint=payload.get("system_fingerprint") or None,
        )
