"""The load generator's streaming client: stdlib `http.client`, one keep-alive
connection per client thread.

The same request and the same stream parsing as `client.stream_request` (the
kind's `generate_request` / `parse_chunk`, `client.sse_data`, the same
`StreamRecord` and timing), on a leaner transport: httpx/httpcore/h11 cost
about twice the client CPU per streamed chunk, which at high concurrency made
the generator a measurable load of its own (docs/load.md). Failures raise
`BenchError` like `stream_request`. See docs/architecture.md "Bench".
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from urllib.parse import urlsplit

from ddtune.bench.client import (
    BenchError,
    RequestSpec,
    StreamRecord,
    apply_chunk,
    finish_counts,
    sse_data,
)
from ddtune.kinds import ServerKind
from ddtune.params import SamplingParams

HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


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
        kind: ServerKind,
        base_url: str,
        spec: RequestSpec,
        *,
        model: str | None,
        temperature: float,
        ignore_eos: bool,
    ) -> StreamRecord:
        """Send one streaming request and time it; raises BenchError on any failure."""
        sampling = SamplingParams(
            max_new_tokens=spec.max_tokens,
            temperature=float(temperature),
            seed=spec.seed,
            stop_strings=tuple(spec.stop),
            ignore_eos=ignore_eos,
        )
        url, body = kind.generate_request(base_url, spec.prompt, sampling, model)
        parts = urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        connection = self._connection(parts.scheme, parts.netloc)
        record, start = StreamRecord(), time.perf_counter()
        try:
            connection.request("POST", path, body=json.dumps(body), headers=HEADERS)
            self._read(connection.getresponse(), kind, record, start, f"{url}", spec)
        except (OSError, http.client.HTTPException) as exc:
            connection.close()  # reconnects on the next request
            raise BenchError(
                f"{spec.workload} request {spec.index}: {type(exc).__name__}: {exc}"
            ) from exc
        record.e2e_s = time.perf_counter() - start
        finish_counts(record)
        return record

    def _read(
        self,
        response: http.client.HTTPResponse,
        kind: ServerKind,
        record: StreamRecord,
        start: float,
        url: str,
        spec: RequestSpec,
    ) -> None:
        if response.status != 200:
            detail = response.read().decode("utf-8", errors="replace")[:300]
            raise BenchError(
                f"{spec.workload} request {spec.index}: HTTP {response.status} from {url}: {detail}"
            )
        for line in iter(response.readline, b""):
            if not line.startswith(b"data:"):
                continue
            payload = sse_data(line[5:].strip())
            if payload is None:
                break
            apply_chunk(record, kind.parse_chunk(payload, record.text), time.perf_counter() - start)
        response.read()  # the rest of the body, so the connection can be reused

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
