"""Streaming HTTP client: one request, timed from the server-sent-event stream.

The server's engine (`ddtune.engines`) says where to send the request and how to
read its stream: ddtune, vLLM and generic OpenAI servers get `POST
/v1/completions` with `stream: true` and `stream_options.include_usage` (the
last chunk carries `usage`; ddtune adds `usage.spec`); SGLang gets its native
`POST /generate` stream, whose chunks carry `meta_info` (`completion_tokens`,
`spec_verify_ct`) and, by default, the cumulative text so far.

Timing (perf_counter, client side): TTFT = request sent -> first non-empty
text; end-to-end = request sent -> end of stream; chunk times are kept for the
inter-token figures. Output tokens come from the server's usage/meta_info; when
it sends none, the number of non-empty chunks is used (noted in the record).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from ddtune.engines import ServerEngine, StreamChunk
from ddtune.params import SamplingParams


class BenchError(RuntimeError):
    """A request failed (connection, HTTP status, malformed stream): the run is not comparable."""


Message = tuple[str, str]  # (role, content) of one chat message


@dataclass(frozen=True)
class RequestSpec:
    """One measured request: a completion (`prompt`), a chat (`messages`, sent to the
    server's `/v1/chat/completions`; `follow_ups`: later user turns, each sent with the
    server's own answers so far) or a logged request replayed as it was (`body_json`)."""

    workload: str  # "warmup" | "short" | "long" | "coding" | a suite | "traffic"
    index: int  # position within its workload
    prompt: str
    max_tokens: int
    seed: int | None = None
    stop: tuple[str, ...] = ()
    messages: tuple[Message, ...] = ()
    follow_ups: tuple[str, ...] = ()
    body_json: str | None = None  # traffic: the logged OpenAI body (JSON text)

    def greedy(self, ignore_eos: bool) -> SamplingParams:
        """Its sampling at T = 0 (asked again after the stream: logit gaps, token paths)."""
        return SamplingParams(
            max_new_tokens=self.max_tokens,
            temperature=0.0,
            seed=self.seed,
            stop_strings=tuple(self.stop),
            ignore_eos=ignore_eos,
        )


@dataclass
class StreamRecord:
    text: str = ""
    ttft_s: float | None = None
    e2e_s: float = 0.0
    chunk_times_s: list[float] = field(default_factory=list)  # since send, per non-empty chunk
    chunk_tokens: list[int] = field(default_factory=list)  # cumulative tokens per chunk, if sent
    output_tokens: int = 0
    tokens_counted_by: str = "usage"  # "usage" | "meta_info" | "chunks"
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    meta_info: dict[str, Any] | None = None
    fingerprint: str | None = None  # the last `system_fingerprint` the stream carried
    sent_at: float = 0.0  # unix seconds when the request was sent
    turns: list[StreamRecord] = field(default_factory=list)  # a chat's later turns, in order


def discover_model(client: httpx.Client, base_url: str, engine: ServerEngine) -> str | None:
    """The first model id the server lists, or None when it does not list models."""
    try:
        return engine.model_name(client, base_url)
    except (httpx.HTTPError, ValueError, LookupError, AttributeError, TypeError):
        return None


def build_request(
    engine: ServerEngine,
    base_url: str,
    spec: RequestSpec,
    model: str | None,
    temperature: float,
    ignore_eos: bool,
) -> tuple[str, dict[str, Any]]:
    """The engine's (url, JSON body) for one measured request."""
    if spec.body_json is not None:
        return engine.replay_request(base_url, json.loads(spec.body_json), model)
    sampling = SamplingParams(
        max_new_tokens=spec.max_tokens,
        temperature=float(temperature),
        seed=spec.seed,
        stop_strings=tuple(spec.stop),
        ignore_eos=ignore_eos,
    )
    if spec.messages:
        return engine.chat_request(base_url, [list(m) for m in spec.messages], sampling, model)
    return engine.generate_request(base_url, spec.prompt, sampling, model)


def next_turn(spec: RequestSpec, answer: str) -> RequestSpec:
    """The chat's next request: its messages, the server's own answer, the next user turn."""
    messages = (*spec.messages, ("assistant", answer), ("user", spec.follow_ups[0]))
    return replace(spec, messages=messages, follow_ups=spec.follow_ups[1:])


def records_in_order(records: Sequence[StreamRecord]) -> list[StreamRecord]:
    """Every response of `records` in sample order: each request, then its later turns."""
    return [r for record in records for r in (record, *record.turns)]


def stream_request(
    client: httpx.Client,
    base_url: str,
    engine: ServerEngine,
    spec: RequestSpec,
    *,
    model: str | None,
    temperature: float,
    ignore_eos: bool,
) -> StreamRecord:
    """Send one streaming request and time it (a chat's later turns after it, each in
    `record.turns`); raises BenchError on any failure."""

    def one(turn: RequestSpec) -> StreamRecord:
        url, body = build_request(engine, base_url, turn, model, temperature, ignore_eos)
        return _stream_one(client, engine, turn, url, body)

    record = one(spec)
    turn = spec
    while turn.follow_ups:
        turn = next_turn(turn, (record.turns[-1] if record.turns else record).text)
        record.turns.append(one(turn))
    return record


def _stream_one(
    client: httpx.Client, engine: ServerEngine, spec: RequestSpec, url: str, body: dict[str, Any]
) -> StreamRecord:
    record = StreamRecord(sent_at=time.time())
    start = time.perf_counter()
    try:
        with client.stream("POST", url, json=body) as response:
            if response.status_code != 200:
                raise status_error(spec, response.status_code, url, response.read())
            read_sse(record, engine, _sse_lines(response), start)
    except httpx.HTTPError as exc:
        raise transport_error(spec, exc) from exc
    return finish_record(record, start)


def _sse_lines(response: httpx.Response) -> Iterator[bytes]:
    """The lines of an SSE stream, split from the bytes here (UTF-8 never has a newline byte
    inside a character): httpx's text and line decoders cost more CPU per chunk than the
    rest of the client together (benchmarks/load_client_overhead.py)."""
    buffer = b""
    for data in response.iter_bytes():
        buffer += data
        *lines, buffer = buffer.split(b"\n")
        yield from lines


def read_sse(
    record: StreamRecord, engine: ServerEngine, lines: Iterable[bytes], start: float
) -> None:
    """Each `data:` JSON object of an SSE stream's `lines`, until `[DONE]`, read by the engine
    and applied to `record` at its time since `start`."""
    for line in lines:
        if not line.startswith(b"data:"):
            continue
        payload = sse_data(line[5:].strip())
        if payload is None:
            return
        apply_chunk(record, engine.parse_chunk(payload, record.text), time.perf_counter() - start)


def status_error(spec: RequestSpec, status: int, url: str, body: bytes) -> BenchError:
    """The failure of a request the server answered with another status than 200."""
    detail = body.decode("utf-8", errors="replace")[:300]
    return BenchError(f"{spec.workload} request {spec.index}: HTTP {status} from {url}: {detail}")


def transport_error(spec: RequestSpec, exc: Exception) -> BenchError:
    """The failure of a request the transport raised `exc` for."""
    return BenchError(f"{spec.workload} request {spec.index}: {type(exc).__name__}: {exc}")


def sse_data(data: bytes) -> dict[str, Any] | None:
    """One `data:` value as a JSON object; None for `[DONE]`."""
    if data == b"[DONE]":
        return None
    text = data.decode("utf-8", errors="replace")
    try:
        payload = json.loads(text)
    except json.JSONDecodeError:
        raise BenchError(f"malformed stream chunk: {text[:200]!r}") from None
    if not isinstance(payload, dict):
        raise BenchError(f"stream chunk is not a JSON object: {text[:200]!r}")
    if "error" in payload:
        raise BenchError(f"server error in stream: {json.dumps(payload['error'])[:300]}")
    return payload


def apply_chunk(record: StreamRecord, chunk: StreamChunk, now: float) -> None:
    if chunk.usage:
        record.usage = chunk.usage
    if chunk.meta_info:
        record.meta_info = chunk.meta_info
    if chunk.finish_reason:
        record.finish_reason = chunk.finish_reason
    if chunk.fingerprint:
        record.fingerprint = chunk.fingerprint
    if chunk.text:
        record.text += chunk.text
        record.chunk_times_s.append(now)
        count = (chunk.meta_info or {}).get("completion_tokens")
        if isinstance(count, int):  # SGLang: cumulative tokens in every chunk
            record.chunk_tokens.append(count)
        if record.ttft_s is None:
            record.ttft_s = now


def finish_record(record: StreamRecord, start: float) -> StreamRecord:
    """The stream ended: its end-to-end time since `start`, and its token counts."""
    record.e2e_s = time.perf_counter() - start
    source = record.usage if record.usage is not None else record.meta_info
    if source and isinstance(source.get("completion_tokens"), int):
        record.output_tokens = source["completion_tokens"]
        record.tokens_counted_by = "usage" if record.usage is not None else "meta_info"
        prompt_tokens = source.get("prompt_tokens")
        record.prompt_tokens = prompt_tokens if isinstance(prompt_tokens, int) else None
    else:
        record.output_tokens = len(record.chunk_times_s)
        record.tokens_counted_by = "chunks"
    return record
