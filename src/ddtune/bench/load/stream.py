"""The load generator's streaming client: stdlib `http.client`, one keep-alive
connection per client thread.

The same request and the same stream parsing as `client.stream_request` (the
engine's `generate_request` / `parse_chunk`, `client.read_sse`, the same
`StreamRecord` and timing; a request on a kept-alive connection the server
closed while idle is sent once more on a fresh one, as httpx does), on a
leaner transport: httpx/httpcore/h11 cost
about twice the client CPU per streamed chunk, which at high concurrency made
the generator a measurable load of its own (docs/load.md). Failures raise
`BenchError` like `stream_request`. See docs/bench.md "Bench".
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from urllib.parse import urlsplit

from ddtune.bench.client import (
    RequestSpec,
    StreamRecord,
    build_request,
    finish_record,
    read_sse,
    status_error,
    transport_error,
)
from ddtune.engines import ServerEngine

HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}
# what a request on a connection the server closed while idle fails with
STALE = (
    BrokenPipeError,
    ConnectionResetError,
    ConnectionAbortedError,
    http.client.RemoteDisconnected,
)


class LeanStreamer:
    """Streams requests to one server; each thread keeps its own connection."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.local = threading.local()
        self.lock = threading.Lock()
        self.connections: list[http.client.HTTPConnection] = []

    def close(self) -> None:
        with self.lock:
            for connection in self.connections:
                connection.close()
            self.connections.clear()

    def stream(
        self,
        engine: ServerEngine,
        base_url: str,
        spec: RequestSpec,
        *,
        model: str | None,
        temperature: float,
        ignore_eos: bool,
    ) -> StreamRecord:
        """Send one streaming request and time it; raises BenchError on any failure."""
        url, body = build_request(engine, base_url, spec, model, temperature, ignore_eos)
        record, start = StreamRecord(), time.perf_counter()
        try:
            response = self._send(url, json.dumps(body))
            if response.status != 200:
                raise status_error(spec, response.status, url, response.read())
            read_sse(record, engine, iter(response.readline, b""), start)
            response.read()  # the rest of the body, so the connection can be reused
        except (OSError, http.client.HTTPException) as exc:
            self._drop()  # reconnects on the next request
            raise transport_error(spec, exc) from exc
        return finish_record(record, start)

    def _send(self, url: str, body: str) -> http.client.HTTPResponse:
        """POST on this thread's connection; once more on a fresh one when the server had
        closed the kept-alive connection while it was idle (its keep-alive timeout)."""
        parts = urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        for attempt in (1, 2):
            connection = self._connection(parts.scheme, parts.netloc)
            reused = connection.sock is not None
            try:
                connection.request("POST", path, body=body, headers=HEADERS)
                return connection.getresponse()
            except STALE as exc:
                self._drop()
                if not reused or attempt == 2:
                    raise exc
        raise AssertionError("not reached")

    def _drop(self) -> None:
        connection = getattr(self.local, "connection", None)
        if connection is not None:
            connection.close()

    def _connection(self, scheme: str, netloc: str) -> http.client.HTTPConnection:
        key = (scheme, netloc)
        cached = getattr(self.local, "connection", None)
        if cached is not None and getattr(self.local, "key", None) == key:
            return cached
        cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        connection = cls(netloc, timeout=self.timeout_s)
        self.local.connection, self.local.key = connection, key
        with self.lock:
            self.connections.append(connection)
        return connection


__all__ = ["LeanStreamer"]
