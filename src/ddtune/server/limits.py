"""Request-body limits enforced at the ASGI level: size, read deadline, uploads cut short.

See docs/server.md "Server" (limits). `BodyGuard` wraps the app and
every `receive()` it makes, so the limits hold whatever the handler does with
the body:

- a `Content-Length` over `max_bytes` is answered 413 before any of the body
  is read (and before `100 Continue`); a body without one (chunked) is
  counted as it arrives and answered 413 as soon as it passes `max_bytes`;
- the whole body must arrive within `timeout_s` of the request head, else
  408 (slow or partial uploads cannot hold a connection);
- a client that disconnects mid-upload is one log line, not a traceback.

Every answer the guard causes carries `Connection: close`, and so does any
response sent before its request body was read to the end. Such an early
answer is followed by a *lingering close*: the guard keeps reading and
discarding the rest of the body, for at most `linger_s` seconds (5) and
`linger_bytes(max_bytes)` bytes (twice the limit, at least 64 MiB), and only
then lets the server close. Closing a socket with unread data makes the kernel
send a reset, which can destroy the answer before a client that is still
uploading reads it (httpx, requests and the openai SDK send the whole body
before they read anything). The drain holds one 64 KiB piece at a time.

The errors are `ApiError`s, so the app's handler turns them into OpenAI error
bodies; without that handler the guard answers itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ddtune.server.api.errors import ApiError

log = logging.getLogger("ddtune.server")

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

CLOSE = {"Connection": "close"}
LINGER_S = 5.0  # the longest an early answer waits for the rest of the body
LINGER_MIN_BYTES = 64 * 2**20  # drain at least this much (a 10 MB prompt at a 4 MiB limit)


def linger_bytes(max_bytes: int) -> int:
    """How much of an unread body an early answer drains: twice the limit, >= 64 MiB."""
    return max(2 * max_bytes, LINGER_MIN_BYTES)


class BodyProblem(ApiError):
    """The request body broke a limit; `log_line` says so in one line."""

    def __init__(self, status: int, message: str, code: str, log_line: str) -> None:
        super().__init__(status, message, code=code, headers=dict(CLOSE))
        self.log_line = log_line


def too_large(limit: int, seen: int, declared: bool) -> BodyProblem:
    how = "declares" if declared else "has at least"
    return BodyProblem(
        413,
        f"the request body {how} {seen} bytes; this server takes at most {limit} "
        "(--max-request-bytes)",
        "request_too_large",
        f"rejected a request body over {limit} bytes ({how} {seen})",
    )


def too_slow(timeout_s: float, seen: int) -> BodyProblem:
    return BodyProblem(
        408,
        f"the request body did not arrive within {timeout_s:g} s "
        "(--body-timeout-seconds); send it faster or in one piece",
        "request_timeout",
        f"closed a request whose body was still incomplete after {timeout_s:g} s ({seen} bytes)",
    )


def upload_aborted(seen: int) -> BodyProblem:
    return BodyProblem(
        400,
        "the client disconnected before sending the whole body",
        "client_disconnected",
        f"client disconnected during upload ({seen} bytes received)",
    )


class BodyReader:
    """The `receive` a guarded app sees: counts bytes, keeps the deadline, spots aborts."""

    def __init__(self, receive: Receive, max_bytes: int, timeout_s: float, empty: bool) -> None:
        self.raw_receive = receive
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s
        self.seen = 0
        self.complete = empty  # a request without a body has nothing left to read

    async def __call__(self) -> Message:
        if self.complete:  # after the body: disconnect watchers wait here, no deadline
            return await self.raw_receive()
        remaining = self.deadline - time.monotonic()
        try:
            message = await asyncio.wait_for(self.raw_receive(), max(remaining, 0.0))
        except TimeoutError:
            raise too_slow(self.timeout_s, self.seen) from None
        if message["type"] == "http.disconnect":
            raise upload_aborted(self.seen)
        if message["type"] == "http.request":
            self.seen += len(message.get("body", b""))
            if self.seen > self.max_bytes:
                raise too_large(self.max_bytes, self.seen, declared=False)
            self.complete = not message.get("more_body", False)
        return message


class BodyGuard:
    """ASGI middleware: `BodyGuard(app, max_bytes=..., timeout_s=..., linger_s=...)`."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, timeout_s: float, linger_s: float = LINGER_S
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.linger_s = linger_s

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared, chunked = body_framing(scope)
        reader = BodyReader(receive, self.max_bytes, self.timeout_s, not chunked and not declared)
        guarded = GuardedSend(send, reader, self.linger_s)
        if declared is not None and declared > self.max_bytes:
            await answer(guarded, too_large(self.max_bytes, declared, declared=True))
            return
        try:
            await self.app(scope, reader, guarded)
        except BodyProblem as exc:  # only when the app has no handler for it
            if not guarded.started:
                await answer(guarded, exc)


class GuardedSend:
    """The `send` a guarded app sees: an answer given before the body was read to the
    end says `Connection: close`, and its last message waits for the lingering close."""

    def __init__(self, send: Send, reader: BodyReader, linger_s: float) -> None:
        self._send = send
        self.reader = reader
        self.linger_s = linger_s
        self.started = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            headers = list(message.get("headers", []))
            if not self.reader.complete and not any(k.lower() == b"connection" for k, _ in headers):
                message = {**message, "headers": [*headers, CLOSE_RAW]}  # body left unread
        last = message["type"] == "http.response.body" and not message.get("more_body", False)
        if last and not self.reader.complete:
            await self._send({**message, "more_body": True})  # the whole answer is out...
            await self.linger()  # ... and the server closes only after this
            message = {"type": "http.response.body", "body": b"", "more_body": False}
        await self._send(message)

    async def linger(self) -> None:
        """Read and discard the rest of the body: until its end, the client's disconnect,
        `linger_bytes` or `linger_s`, whichever comes first."""
        receive, left = self.reader.raw_receive, linger_bytes(self.reader.max_bytes)
        deadline = time.monotonic() + self.linger_s
        while left > 0:
            try:
                message = await asyncio.wait_for(receive(), max(deadline - time.monotonic(), 0))
            except TimeoutError:
                return
            if message["type"] != "http.request":
                return  # http.disconnect: the client is gone
            left -= len(message.get("body", b""))
            if not message.get("more_body", False):
                self.reader.complete = True
                return


CLOSE_RAW = (b"connection", b"close")


def body_framing(scope: MutableMapping[str, Any]) -> tuple[int | None, bool]:
    """(Content-Length or None, chunked?) from the request head."""
    declared, chunked = None, False
    for name, value in scope.get("headers", []):
        name = name.lower()
        if name == b"content-length" and value.strip().isdigit():
            declared = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    return declared, chunked


async def answer(send: Send, problem: BodyProblem) -> None:
    """Send `problem` as an OpenAI error body (and log its one line)."""
    log.warning(problem.log_line)
    body = json.dumps(problem.body()).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        CLOSE_RAW,
    ]
    await send({"type": "http.response.start", "status": problem.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
