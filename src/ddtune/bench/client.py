"""Streaming HTTP client: one request, timed from the server-sent-event stream.

ddtune, vLLM and generic OpenAI servers get `POST /v1/completions` with
`stream: true` and `stream_options.include_usage` (the last chunk carries
`usage`; ddtune adds `usage.spec`). SGLang gets its native `POST /generate`
stream, whose chunks carry `meta_info` (`completion_tokens`, `spec_verify_ct`)
and, by default, the cumulative text so far.

Timing (perf_counter, client side): TTFT = request sent -> first non-empty
text; end-to-end = request sent -> end of stream; chunk times are kept for the
inter-token figures. Output tokens come from the server's usage/meta_info; when
it sends none, the number of non-empty chunks is used (noted in the record).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

SERVER_KINDS = ("ddtune", "sglang", "vllm", "openai")
IGNORE_EOS_KINDS = ("ddtune", "sglang", "vllm")


class BenchError(RuntimeError):
    """A request failed (connection, HTTP status, malformed stream): the run is not comparable."""


@dataclass(frozen=True)
class RequestSpec:
    workload: str  # "warmup" | "short" | "long" | "coding"
    index: int  # position within its workload
    prompt: str
    max_tokens: int
    seed: int | None = None
    stop: tuple[str, ...] = ()


@dataclass
class StreamRecord:
    text: str = ""
    ttft_s: float | None = None
    e2e_s: float = 0.0
    chunk_times_s: list[float] = field(default_factory=list)  # since send, per non-empty chunk
    output_tokens: int = 0
    tokens_counted_by: str = "usage"  # "usage" | "meta_info" | "chunks"
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    meta_info: dict[str, Any] | None = None


def discover_model(client: httpx.Client, base_url: str) -> str | None:
    """The first model id of `/v1/models`, or None when the server does not list models."""
    try:
        response = client.get(f"{base_url}/v1/models")
        response.raise_for_status()
        data = response.json().get("data") or []
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return data[0].get("id") if data and isinstance(data[0], dict) else None


def stream_request(
    client: httpx.Client,
    base_url: str,
    kind: str,
    spec: RequestSpec,
    *,
    model: str | None,
    temperature: float,
    ignore_eos: bool,
) -> StreamRecord:
    """Send one streaming request and time it; raises BenchError on any failure."""
    url, body = _request_body(base_url, kind, spec, model, temperature, ignore_eos)
    record = StreamRecord()
    start = time.perf_counter()
    try:
        with client.stream("POST", url, json=body) as response:
            if response.status_code != 200:
                detail = response.read().decode("utf-8", errors="replace")[:300]
                raise BenchError(
                    f"{spec.workload} request {spec.index}: HTTP {response.status_code} from {url}: {detail}"
                )
            for payload in _sse_payloads(response):
                _apply_chunk(record, kind, payload, time.perf_counter() - start)
    except httpx.HTTPError as exc:
        raise BenchError(
            f"{spec.workload} request {spec.index}: {type(exc).__name__}: {exc}"
        ) from exc
    record.e2e_s = time.perf_counter() - start
    _finish_counts(record)
    return record


def _request_body(
    base_url: str,
    kind: str,
    spec: RequestSpec,
    model: str | None,
    temperature: float,
    ignore_eos: bool,
) -> tuple[str, dict[str, Any]]:
    send_ignore_eos = ignore_eos and kind in IGNORE_EOS_KINDS
    if kind == "sglang":
        params: dict[str, Any] = {"max_new_tokens": spec.max_tokens, "temperature": temperature}
        if send_ignore_eos:
            params["ignore_eos"] = True
        if spec.stop:
            params["stop"] = list(spec.stop)
        return f"{base_url}/generate", {
            "text": spec.prompt,
            "sampling_params": params,
            "stream": True,
        }
    body: dict[str, Any] = {
        "prompt": spec.prompt,
        "max_tokens": spec.max_tokens,
        "temperature": temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if model is not None:
        body["model"] = model
    if spec.seed is not None:
        body["seed"] = spec.seed
    if spec.stop:
        body["stop"] = list(spec.stop)
    if send_ignore_eos:
        body["ignore_eos"] = True
    return f"{base_url}/v1/completions", body


def _sse_payloads(response: httpx.Response):
    """Yield each `data:` JSON object of an SSE stream until `[DONE]`."""
    for line in response.iter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        try:
            payload = json.loads(data)
        except json.JSONDecodeError:
            raise BenchError(f"malformed stream chunk: {data[:200]!r}") from None
        if isinstance(payload, dict) and "error" in payload:
            raise BenchError(f"server error in stream: {json.dumps(payload['error'])[:300]}")
        yield payload


def _apply_chunk(record: StreamRecord, kind: str, payload: dict[str, Any], now: float) -> None:
    if kind == "sglang":
        delta = _sglang_delta(record.text, payload.get("text") or "")
        record.meta_info = payload.get("meta_info") or record.meta_info
        finish = (record.meta_info or {}).get("finish_reason")
        record.finish_reason = finish.get("type") if isinstance(finish, dict) else finish
    else:
        choices = payload.get("choices") or []
        delta = (choices[0].get("text") or "") if choices else ""
        if choices and choices[0].get("finish_reason"):
            record.finish_reason = choices[0]["finish_reason"]
        if payload.get("usage"):
            record.usage = payload["usage"]
    if delta:
        record.text += delta
        record.chunk_times_s.append(now)
        if record.ttft_s is None:
            record.ttft_s = now


def _sglang_delta(so_far: str, text: str) -> str:
    """SGLang streams the cumulative text by default; accept incremental chunks too."""
    return text[len(so_far) :] if text.startswith(so_far) else text


def _finish_counts(record: StreamRecord) -> None:
    source = record.usage if record.usage is not None else record.meta_info
    if source and isinstance(source.get("completion_tokens"), int):
        record.output_tokens = source["completion_tokens"]
        record.tokens_counted_by = "usage" if record.usage is not None else "meta_info"
        prompt_tokens = source.get("prompt_tokens")
        record.prompt_tokens = prompt_tokens if isinstance(prompt_tokens, int) else None
    else:
        record.output_tokens = len(record.chunk_times_s)
        record.tokens_counted_by = "chunks"
