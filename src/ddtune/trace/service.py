"""Greedy continuations from the running service (`ddtune trace record --from-service URL`).

    requests = continue_from_service("http://127.0.0.1:8000", requests, block=16)

The target's T = 0 path is what the served engine commits at temperature 0,
so the service can decode it instead of the trace: one completion per request
(`/v1/completions`, temperature 0, EOS ignored, max_tokens plus a block less
one, as `record.continuation` wants), and the local work is one teacher-forced
forward per request and the drafter over its positions. Where the service
returns the token ids (vLLM's `return_token_ids`), the trace uses them as
they are; else the text is a stored continuation (`TraceRequest.continuation`,
as `--store` gives). Either way the recording checks each continuation token
against the target's own teacher-forced argmax (`greedy_mismatches`: a
near-tie, or a service that is not lossless at T = 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import httpx

from ddtune.errors import UserError
from ddtune.trace.requests import TraceRequest


def continue_from_service(
    url: str,
    requests: Sequence[TraceRequest],
    block: int,
    model: str | None = None,
    timeout_s: float = 600.0,
) -> list[TraceRequest]:
    """Each request with the service's T = 0 continuation (UserError: the service cannot)."""
    base = url.rstrip("/")
    try:
        with httpx.Client(timeout=timeout_s) as client:
            name = model or _first_model(client, base)
            return [_continued(client, base, name, r, block) for r in requests]
    except httpx.HTTPError as exc:
        raise UserError(f"--from-service {url}: {exc}; is the service running there?") from None


def _first_model(client: httpx.Client, base: str) -> str:
    data = client.get(base + "/v1/models").raise_for_status().json()
    ids = [m.get("id") for m in data.get("data") or [] if isinstance(m, dict)]
    if not ids or not isinstance(ids[0], str):
        raise UserError(f"--from-service {base}: /v1/models names no model; pass --service-model")
    return ids[0]


def _continued(
    client: httpx.Client, base: str, model: str, request: TraceRequest, block: int
) -> TraceRequest:
    body = {
        "model": model,
        "prompt": request.prompt,
        "max_tokens": request.max_tokens + block - 1,
        "temperature": 0,
        "ignore_eos": True,
        "return_token_ids": True,
    }
    reply = client.post(base + "/v1/completions", json=body).raise_for_status().json()
    choice: dict[str, Any] = (reply.get("choices") or [{}])[0]
    ids = choice.get("token_ids")
    if isinstance(ids, list) and ids and all(isinstance(i, int) for i in ids):
        return replace(request, continuation_ids=tuple(ids))
    text = choice.get("text")
    if not isinstance(text, str):
        raise UserError(f"--from-service {base}: a completion without text: {reply!r:.200}")
    return replace(request, continuation=text)


__all__ = ["continue_from_service"]
