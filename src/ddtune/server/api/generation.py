"""The OpenAI generation endpoints: bridge an HTTP request to the worker thread.

Flow for one request: validate the body → submit a `Job` (a full queue is a
503 with Retry-After) → either wait for the whole result (watching for the
client going away) or stream SSE chunks as rounds commit. A client that
disconnects cancels its job: dropped if still queued, stopped after the
current round if running. See docs/server.md "Server".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.server.api.errors import ApiError, unavailable
from ddtune.server.api.requests import GenerationRequest, parse_generation
from ddtune.server.api.responses import (
    SSE_DONE,
    ResponseShape,
    StreamText,
    answer,
    finish_reason,
    running_usage,
    sse,
    usage,
)
from ddtune.server.identity import system_fingerprint
from ddtune.server.jsonbody import decode_json
from ddtune.server.state import ServerState
from ddtune.server.worker import Job, JobOutcome, QueueFull

log = logging.getLogger("ddtune.server")


async def handle(request: Request, state: ServerState, kind: str) -> Response:
    """POST /v1/completions (kind "completion") and /v1/chat/completions ("chat")."""
    endpoint = "completions" if kind == "completion" else "chat"
    try:
        state.require_serving()
        body = await read_json(request)
        # Validation, chat template and tokenizer run off the event loop.
        req = await asyncio.to_thread(parse_generation, kind, body, state.loaded_context())
        call = WorkerCall(state, req)
        call.submit()
    except ApiError as exc:
        state.metrics.requests.labels(endpoint, _outcome(exc)).inc()
        raise
    shape = ResponseShape(kind, state.model_name, fingerprint="")
    headers = _ignored_header(req, request)
    if req.stream:
        return StreamingResponse(
            _stream(call, shape, endpoint),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", **headers},
        )
    outcome = await call.wait_or_disconnect(request)
    if outcome is None:  # the client went away; nobody reads this
        state.metrics.requests.labels(endpoint, "cancelled").inc()
        return JSONResponse({}, status_code=499)
    if outcome.error is not None or outcome.dropped:
        state.metrics.requests.labels(endpoint, "error").inc()
        raise _failure(outcome)
    result = outcome.result
    shape.fingerprint = system_fingerprint(outcome.params, outcome.config_generation)
    state.metrics.requests.labels(endpoint, "ok").inc()
    text, logprobs = answer(req, result, state.engine.tokenizer.decode)
    reason = finish_reason(result) if req.show_generated else "length"
    counts = usage(len(req.prompt_ids), result, req.show_generated)
    body = shape.full(text, reason, counts, logprobs)
    if req.return_token_ids:  # vLLM's extension: the ids the model read and wrote
        shown = list(result.token_ids) if req.show_generated else []
        body["choices"][0] |= {"prompt_token_ids": list(req.prompt_ids), "token_ids": shown}
    return JSONResponse(body, headers=headers)


IGNORED_HEADER = "ddtune-ignored-fields"
MAX_NAMED = 20


def _ignored_header(req: GenerationRequest, request: Request) -> dict[str, str]:
    """Unknown fields the request carried: named in a header and one log line (as vLLM logs).

    Names are shown as JSON strings (quoted, ASCII, no control characters), at most
    `MAX_NAMED` of them, so any key a client sends (even "") makes a valid header."""
    if not req.ignored_fields:
        return {}
    shown = [json.dumps(name) for name in req.ignored_fields[:MAX_NAMED]]
    more = len(req.ignored_fields) - len(shown)
    names = ", ".join(shown) + (f", ... ({more} more)" if more else "")
    log.warning("%s %s: ignored unknown fields: %s", request.method, request.url.path, names)
    return {IGNORED_HEADER: names}


async def read_json(request: Request) -> Any:
    """The body (size and time bounded by `limits.BodyGuard`), decoded off the event loop."""
    return await asyncio.to_thread(decode_json, await request.body())


class WorkerCall:
    """One job on the worker, with its thread→event-loop channel."""

    def __init__(self, state: ServerState, req: GenerationRequest) -> None:
        self.state = state
        self.req = req
        self.loop = asyncio.get_running_loop()
        self.events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.started: tuple[DecodeParams, int] | None = None
        self.job = Job(
            prompt_ids=req.prompt_ids,
            sampling=req.sampling,
            on_done=lambda outcome: self._post("done", outcome),
            on_tokens=(lambda ids: self._post("tokens", ids)) if req.stream else None,
            on_start=self._on_start,
        )

    def submit(self) -> None:
        try:
            self.state.loaded_worker().submit(self.job)
        except QueueFull:
            raise unavailable(
                f"the request queue is full ({self.state.config.max_queue} waiting); retry later",
                "queue_full",
                retry_after=1,
            ) from None
        except RuntimeError:
            raise unavailable("the server is shutting down", "shutting_down") from None

    def cancel(self) -> None:
        self.state.loaded_worker().cancel(self.job)

    async def next_event(self) -> tuple[str, Any]:
        return await self.events.get()

    async def wait_or_disconnect(self, request: Request) -> JobOutcome | None:
        """The job's outcome, or None (job cancelled) if the client disconnects first."""
        watcher = asyncio.ensure_future(_disconnected(request))
        try:
            while True:
                getter = asyncio.ensure_future(self.events.get())
                done, _ = await asyncio.wait({getter, watcher}, return_when="FIRST_COMPLETED")
                if getter not in done:
                    getter.cancel()
                    self.cancel()
                    return None
                kind, payload = getter.result()
                if kind == "done":
                    return payload
        finally:
            watcher.cancel()

    def _on_start(self, params: DecodeParams, generation: int) -> None:
        self.started = (params, generation)

    def _post(self, kind: str, payload: Any) -> None:
        # RuntimeError: the event loop is closed, the process is exiting.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.events.put_nowait, (kind, payload))


async def _stream(call: WorkerCall, shape: ResponseShape, endpoint: str) -> AsyncIterator[str]:
    req, state = call.req, call.state
    text = StreamText(state.engine.tokenizer.decode, req.sampling.stop_strings)
    prompt_tokens = len(req.prompt_ids)
    first, finished = True, False
    try:
        # 1. Deltas as rounds commit (held back where a stop string may start). Never an
        #    empty chunk: clients time the first one as the first token.
        while True:
            kind, payload = await call.next_event()
            if kind == "done":
                outcome: JobOutcome = payload
                break
            if call.started is not None:
                shape.fingerprint = system_fingerprint(*call.started)
            delta = text.feed(payload)
            if delta:
                so_far = (
                    running_usage(prompt_tokens, len(text.ids)) if req.continuous_usage else None
                )
                yield shape.chunk(delta, first=first, usage=so_far)
                first = False
        finished = True
        # 2. The rest of the text with the finish reason, then usage, then [DONE].
        if outcome.error is not None or outcome.dropped:
            state.metrics.requests.labels(endpoint, "error").inc()
            yield sse(_failure(outcome).body())
            yield SSE_DONE
            return
        result = outcome.result
        shape.fingerprint = system_fingerprint(outcome.params, outcome.config_generation)
        final = usage(prompt_tokens, result)
        last = final if req.continuous_usage else None
        yield shape.chunk(text.finish(result.text), finish_reason(result), first, usage=last)
        if req.include_usage:
            yield shape.usage_chunk(final)
        yield SSE_DONE
        state.metrics.requests.labels(endpoint, "ok").inc()
    finally:
        if not finished:  # the client went away mid-stream
            call.cancel()
            state.metrics.requests.labels(endpoint, "cancelled").inc()


async def _disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _failure(outcome: JobOutcome) -> ApiError:
    if outcome.dropped:
        return unavailable("the request was cancelled before it started", "cancelled")
    if isinstance(outcome.error, UserError):  # the engine refused this request's input
        return ApiError(400, str(outcome.error), code="invalid_request")
    return ApiError(500, f"generation failed: {outcome.error}", code="generation_failed")


def _outcome(exc: ApiError) -> str:
    return "unavailable" if exc.status == 503 else "rejected"
