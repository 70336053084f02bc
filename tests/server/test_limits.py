"""`BodyGuard` around a bare ASGI app (no FastAPI, no handlers: the limits hold on their
own) and `decode_json` on its own."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import pytest

from ddtune.server.api.errors import ApiError
from ddtune.server.jsonbody import MAX_DEPTH, decode_json
from ddtune.server.limits import BodyGuard, linger_bytes

Message = dict[str, Any]


class Client:
    """Feeds `chunks` to the guard one `receive()` at a time (None = never arrives)."""

    def __init__(self, chunks: list[bytes | None], disconnect: bool = False) -> None:
        self.chunks = chunks
        self.disconnect = disconnect
        self.received = 0  # receive() calls answered
        self.received_at_answer: int | None = None  # receive() calls before the answer began
        self.sent: list[Message] = []

    async def receive(self) -> Message:
        if self.received == len(self.chunks):
            if self.disconnect:
                return {"type": "http.disconnect"}
            await asyncio.sleep(3600)
        chunk = self.chunks[self.received]
        if chunk is None:
            await asyncio.sleep(3600)
        self.received += 1
        more = self.received < len(self.chunks) or self.disconnect
        return {"type": "http.request", "body": chunk, "more_body": more}

    async def send(self, message: Message) -> None:
        if not self.sent:
            self.received_at_answer = self.received
        self.sent.append(message)

    @property
    def status(self) -> int:
        return self.sent[0]["status"]

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.sent[0]["headers"])

    def error(self) -> dict[str, Any]:
        return json.loads(b"".join(m.get("body", b"") for m in self.sent[1:]))["error"]


async def read_all_app(scope: Message, receive: Any, send: Any) -> None:
    """A plain ASGI app: reads the whole body, answers its length."""
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(size).encode()})


async def early_answer_app(scope: Message, receive: Any, send: Any) -> None:
    """Answers without reading the body."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def run(
    client: Client,
    headers: dict[str, str],
    app: Any = read_all_app,
    timeout: float = 5.0,
    linger: float = 0.3,
):
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    guard = BodyGuard(app, max_bytes=1000, timeout_s=timeout, linger_s=linger)
    asyncio.run(asyncio.wait_for(guard(scope, client.receive, client.send), 10))
    return client


CHUNKED = {"Transfer-Encoding": "chunked"}


def test_a_body_within_the_limit_passes() -> None:
    client = run(Client([b"x" * 600, b"y" * 400]), CHUNKED)
    assert client.status == 200 and client.sent[1]["body"] == b"1000"
    assert (b"connection", b"close") not in client.sent[0]["headers"]


def test_a_declared_length_over_the_limit_is_413_unread() -> None:
    client = run(Client([b"x" * 1000, b"x" * 1000]), {"Content-Length": "2000"})
    assert client.received_at_answer == 0  # answered before a byte was read
    assert client.status == 413 and client.error()["code"] == "request_too_large"
    assert client.headers[b"connection"] == b"close"
    assert client.received == 2  # then the rest was read and dropped (lingering close)
    assert [m.get("more_body", False) for m in client.sent[1:]] == [True, False]
    assert client.sent[-1]["body"] == b""  # the answer was complete before the drain


def test_a_chunked_body_is_cut_at_the_limit() -> None:
    client = run(Client([b"x" * 600, b"x" * 600, b"x" * 600, b"x" * 600]), CHUNKED)
    assert client.received_at_answer == 2  # answered the moment 1000 was passed
    assert client.status == 413 and "at least 1200" in client.error()["message"]
    assert client.received == 4  # the rest drained before the close


def test_the_drain_stops_at_its_byte_bound() -> None:
    piece = b"x" * 65536
    pieces = linger_bytes(1000) // len(piece) + 50
    client = run(Client([piece] * pieces), {"Content-Length": str(len(piece) * pieces)})
    assert client.status == 413
    assert client.received == linger_bytes(1000) // len(piece)  # then the close, unread


def test_the_drain_stops_at_its_deadline_and_on_disconnect() -> None:
    started = time.monotonic()
    client = run(Client([b"x" * 600, None]), {"Content-Length": "5000"}, linger=0.3)
    assert client.status == 413 and client.received == 1
    assert 0.3 <= time.monotonic() - started < 3
    client = run(Client([b"x" * 600], disconnect=True), {"Content-Length": "5000"}, linger=30)
    assert client.status == 413 and client.sent[-1] == {
        "type": "http.response.body",
        "body": b"",
        "more_body": False,
    }


def test_a_slow_body_is_408() -> None:
    client = run(Client([b"x" * 10, None]), {"Content-Length": "100"}, timeout=0.3)
    assert client.status == 408 and client.error()["code"] == "request_timeout"
    assert client.headers[b"connection"] == b"close"


def test_a_dropped_upload_is_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ddtune.server"):
        run(Client([b"x" * 10], disconnect=True), {"Content-Length": "100"})
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["client disconnected during upload (10 bytes received)"]
    assert all(r.exc_info is None for r in caplog.records)


def test_an_answer_before_the_body_ends_closes_the_connection() -> None:
    client = run(Client([b"x" * 10, None]), {"Content-Length": "100"}, app=early_answer_app)
    assert client.status == 200 and client.headers[b"connection"] == b"close"
    client = run(Client([]), {}, app=early_answer_app)  # no body at all: keep-alive stays
    assert client.status == 200 and b"connection" not in client.headers


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        (b'{"a": "\\ud800"}', "a"),
        (b'{"a": [{"b": "x\\udc00"}]}', "a[0].b"),
        (b'"\\udfff"', None),
        (b'{"\\ud800x": 1}', None),
    ],
)
def test_lone_surrogates_are_named(raw: bytes, param: str | None) -> None:
    with pytest.raises(ApiError) as info:
        decode_json(raw)
    assert (info.value.status, info.value.code, info.value.param) == (400, "invalid_value", param)


def test_paired_surrogates_and_escaped_backslashes_pass() -> None:
    assert decode_json(b'{"a": "\\ud83d\\ude00"}') == {"a": "\U0001f600"}
    assert decode_json(b'{"a": "\\\\ud800"}') == {"a": "\\ud800"}


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"x",
        b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1),
        b"[" * 100_000 + b"]" * 100_000,
        b"[" + b"1" * 101 + b"]",
        b"[NaN]",
        b"\xef\xbb\xbf{}",
        b"\xff",
    ],
)
def test_bad_json_is_invalid_json(raw: bytes) -> None:
    with pytest.raises(ApiError) as info:
        decode_json(raw)
    assert (info.value.status, info.value.code) == (400, "invalid_json")


def test_depth_and_digits_at_the_limit_pass() -> None:
    assert decode_json(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None
    assert decode_json(b"[-" + b"9" * 100 + b"]") == [-int("9" * 100)]
