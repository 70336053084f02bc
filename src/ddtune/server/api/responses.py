"""OpenAI response bodies and SSE chunks, plus safe incremental detokenization.

`StreamText` turns committed token ids into text deltas that never need to be
taken back: it holds back a trailing partial character (U+FFFD) and any
suffix that could still grow into a stop string, so the concatenated stream
equals the non-streamed text exactly.

See docs/server.md "Server".
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from ddtune.server.api.logprobs import Decode, chat_logprobs, completion_logprobs
from ddtune.server.api.requests import GenerationRequest
from ddtune.server.metrics import accepted_draft_tokens, completion_tokens


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def usage(prompt_tokens: int, result: Any, shown: bool = True) -> dict[str, Any]:
    """OpenAI usage + `spec` (rounds, accepted draft tokens, tokens per round, mean batch).

    `shown` False: max_tokens 0 with echo; the one token that ran is not reported."""
    completion = completion_tokens(result) if shown else 0
    rounds = int(result.stats.rounds)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
        "spec": {
            "rounds": rounds,
            "accepted_tokens": accepted_draft_tokens(result.stats),
            "mean_acceptance_length": completion / rounds if rounds else 0.0,
            "mean_batch_size": float(getattr(result.stats, "mean_batch_size", 1.0)),
        },
    }


def running_usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """vLLM's `continuous_usage_stats`: the counts so far, on every streamed chunk."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def answer(
    req: GenerationRequest, result: Any, decode: Decode
) -> tuple[str, dict[str, Any] | None]:
    """The choice's text and logprobs: under `echo` the prompt comes first; with
    max_tokens 0 (`show_generated` False) the generated token is left out."""
    shown = req.show_generated
    text = result.text if shown else ""
    if req.echo:
        text = decode(req.prompt_ids) + text
    if req.sampling.logprobs is None:
        return text, None
    generated = list(result.logprobs or []) if shown else []
    if req.kind == "chat":
        return text, chat_logprobs(generated, decode)
    prompt = [req.prompt_ids[0], *(result.prompt_logprobs or [])] if req.echo else []
    return text, completion_logprobs([*prompt, *generated], decode)


def finish_reason(result: Any) -> str:
    return result.finish_reason if result.finish_reason in ("stop", "length") else "abort"


class ResponseShape:
    """Builds bodies for one request: "completion" (text) or "chat" (message)."""

    def __init__(self, kind: str, model: str, fingerprint: str) -> None:
        self.kind = kind
        self.model = model
        self.fingerprint = fingerprint
        self.id = new_id("cmpl" if kind == "completion" else "chatcmpl")
        self.created = int(time.time())

    def full(
        self,
        text: str,
        reason: str,
        usage_: dict[str, Any],
        logprobs: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        if self.kind == "completion":
            choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": reason}
        else:
            message = {"role": "assistant", "content": text, "refusal": None}
            choice = {"index": 0, "message": message, "logprobs": logprobs, "finish_reason": reason}
        return {**self._head(chunk=False), "choices": [choice], "usage": usage_}

    def chunk(
        self,
        text: str | None,
        reason: str | None = None,
        first: bool = False,
        usage: dict[str, Any] | None = None,
    ) -> str:
        """One SSE chunk; the first chat chunk carries the role; `usage` when continuous."""
        if self.kind == "completion":
            choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": reason}
        else:
            delta: dict[str, Any] = {"role": "assistant"} if first else {}
            if text is not None:
                delta["content"] = text
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
        extra = {} if usage is None else {"usage": usage}
        return sse({**self._head(chunk=True), "choices": [choice], **extra})

    def usage_chunk(self, usage_: dict[str, Any]) -> str:
        return sse({**self._head(chunk=True), "choices": [], "usage": usage_})

    def _head(self, chunk: bool) -> dict[str, Any]:
        if self.kind == "completion":
            obj = "text_completion"
        else:
            obj = "chat.completion.chunk" if chunk else "chat.completion"
        return {
            "id": self.id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": self.fingerprint,
        }


def sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload)}\n\n"


SSE_DONE = "data: [DONE]\n\n"


class StreamText:
    """Incremental text of a growing id list; every emitted delta is final."""

    def __init__(self, decode: Callable[[list[int]], str], stop: tuple[str, ...]) -> None:
        self.decode = decode
        self.stop = stop
        self.ids: list[int] = []
        self.sent = ""

    def feed(self, new_ids: list[int]) -> str:
        self.ids.extend(new_ids)
        safe = self._safe(self.decode(self.ids))
        if len(safe) <= len(self.sent) or not safe.startswith(self.sent):
            return ""
        delta, self.sent = safe[len(self.sent) :], safe
        return delta

    def finish(self, final_text: str) -> str:
        """The rest of the engine's final text (which is authoritative)."""
        if not final_text.startswith(self.sent):
            return ""  # cannot happen when the engine cuts at the first stop string
        delta, self.sent = final_text[len(self.sent) :], final_text
        return delta

    def _safe(self, text: str) -> str:
        for stop in self.stop:
            at = text.find(stop)
            if at >= 0:
                text = text[:at]
        text = text.rstrip("\ufffd")
        hold = 0
        for stop in self.stop:
            for n in range(min(len(stop) - 1, len(text)), hold, -1):
                if text.endswith(stop[:n]):
                    hold = n
                    break
        return text[: len(text) - hold]
