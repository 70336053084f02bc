"""FakeLoadServer: a loopback OpenAI-completions server with known latency distributions.

For the load tests (and `benchmarks/load_client_overhead.py`): no model behind
it; every request streams `max_tokens` tokens in chunks of `tokens_per_chunk`.
Its timing follows a seeded, known distribution and it records what it meant
to do, so measured percentiles can be checked against the intended ones:

    TTFT       ttft_s (+ with probability ttft_tail_p a Pareto(alpha) stall of scale ttft_tail_s)
    per token  token_s (+ with probability tail_p a Pareto(alpha) stall of scale tail_s),
               times (1 + contention * (requests generating now - 1)): batch slow-down
    serialise  one request at a time (like `ddtune serve` without batching)

Chunks are sent at absolute target times (start + TTFT + the sum of the delays
so far), so a late wake-up does not shift the rest of the stream. Run as a
script (`python fake_load_server.py --port P ...`) it serves until killed;
`separate_process(latency)` runs it so for a test, keeping the server's threads
off the client's interpreter lock as with a real server.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Latency:
    ttft_s: float = 0.02
    token_s: float = 0.005
    tokens_per_chunk: int = 1
    tail_p: float = 0.0
    tail_s: float = 0.0
    ttft_tail_p: float = 0.0
    ttft_tail_s: float = 0.0
    alpha: float = 2.5  # Pareto shape of both tails (heavy: finite mean, p99 far out)
    contention: float = 0.0
    serialise: bool = False
    seed: int = 0


class FakeLoadServer:
    def __init__(
        self,
        latency: Latency | None = None,
        kind: str = "ddtune",
        fail_from: int | None = None,
        port: int = 0,
        drop_idle: bool = False,
    ) -> None:
        self.latency = latency or Latency()
        self.kind = kind
        self.fail_from = fail_from  # POST number (0-based) from which every request gets HTTP 500
        self.drop_idle = drop_idle  # close every connection after its response, unannounced
        # (as a server does whose keep-alive timeout ran out while the client was idle)
        self.lock = threading.Lock()
        self.queue = threading.Lock()  # held while generating when serialise is on
        self.posts = 0
        self.generating = 0
        self.max_generating = 0
        self.arrivals: list[float] = []  # perf_counter at each streamed POST
        self.intended: list[dict] = []  # {"number", "ttft": s, "gaps": [s, ...]} per stream
        self.httpd = _Quiet(("127.0.0.1", port), _handler(self))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeLoadServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def draw(self, number: int, tokens: int) -> tuple[float, list[float]]:
        """(TTFT, per-token delays after the first chunk) of request `number`: seeded."""
        lat, rng = self.latency, random.Random(f"{self.latency.seed}:{number}")
        ttft = lat.ttft_s + _stall(rng, lat.ttft_tail_p, lat.ttft_tail_s, lat.alpha)
        later = max(0, tokens - lat.tokens_per_chunk)
        return ttft, [
            lat.token_s + _stall(rng, lat.tail_p, lat.tail_s, lat.alpha) for _ in range(later)
        ]


class _Quiet(ThreadingHTTPServer):
    """A client closing its keep-alive connection at the end is not an error."""

    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass


def _stall(rng: random.Random, p: float, scale: float, alpha: float) -> float:
    return scale * rng.paretovariate(alpha) if p > 0 and rng.random() < p else 0.0


def _sleep_until(target: float) -> None:
    delay = target - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


def _handler(server: FakeLoadServer) -> type[BaseHTTPRequestHandler]:
    """The request handler class bound to `server`."""
    return type("Handler", (_Handler,), {"fake": server})


class _Handler(BaseHTTPRequestHandler):
    """Answers for `fake`: models/health, /stats, and completions (JSON or a chunked stream)."""

    protocol_version = "HTTP/1.1"
    fake: FakeLoadServer

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        routes = {"/v1/models": self._models, "/health": self._models, "/stats": self._stats}
        routes.get(self.path, self._not_found)()

    def _models(self) -> None:
        self._json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    def _stats(self) -> None:
        """What a test in another process compares against."""
        with self.fake.lock:
            body = {
                "intended": self.fake.intended,
                "arrivals": self.fake.arrivals,
                "max_generating": self.fake.max_generating,
            }
        self._json(200, body)

    def _not_found(self) -> None:
        self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        server = self.fake
        received = time.perf_counter()
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with server.lock:
            number = server.posts
            server.posts += 1
        if server.fail_from is not None and number >= server.fail_from:
            return self._json(500, {"error": {"message": "injected overload"}})
        tokens = int(body.get("max_tokens") or 16)
        if not body.get("stream"):
            text = " tok" * tokens
            choice = {"index": 0, "text": text, "finish_reason": "length"}
            return self._json(200, {"choices": [choice], "usage": _usage(tokens, 1)})
        with server.lock:
            server.arrivals.append(received)
        if server.latency.serialise:
            with server.queue:
                return self._stream(number, tokens, body)
        self._stream(number, tokens, body)

    def _stream(self, number: int, tokens: int, body: dict) -> None:
        server, lat = self.fake, self.fake.latency
        ttft, delays = server.draw(number, tokens)
        started = time.perf_counter()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")  # keep-alive, as real servers do
        self.end_headers()
        self._generating(+1)
        try:
            gaps = self._chunks(started + ttft, tokens, delays, lat)
        finally:
            self._generating(-1)
        rounds = -(-tokens // lat.tokens_per_chunk)
        if (body.get("stream_options") or {}).get("include_usage"):
            self._event({"choices": [], "usage": _usage(tokens, rounds, server.kind)})
        self._write("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        with server.lock:
            server.intended.append({"number": number, "ttft": ttft, "gaps": gaps})
        if server.drop_idle:
            self.close_connection = True

    def _chunks(self, target: float, tokens: int, delays: list[float], lat: Latency) -> list[float]:
        sizes = [
            min(lat.tokens_per_chunk, tokens - i) for i in range(0, tokens, lat.tokens_per_chunk)
        ]
        gaps, used = [], 0
        for j, size in enumerate(sizes):
            if j:
                factor = 1 + lat.contention * max(0, self.fake.generating - 1)
                gap = sum(delays[used : used + size]) * factor
                used += size
                target += gap
                gaps.append(gap)
            _sleep_until(target)
            finish = "length" if j == len(sizes) - 1 else None
            self._event({"choices": [{"index": 0, "text": " tok" * size, "finish_reason": finish}]})
        return gaps

    def _generating(self, step: int) -> None:
        with self.fake.lock:
            self.fake.generating += step
            self.fake.max_generating = max(self.fake.max_generating, self.fake.generating)

    def _event(self, payload: dict) -> None:
        self._write(f"data: {json.dumps(payload)}\n\n")

    def _write(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _json(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _usage(tokens: int, rounds: int, kind: str = "openai") -> dict:
    usage: dict = {"prompt_tokens": 10, "completion_tokens": tokens}
    if kind == "ddtune":
        usage["spec"] = {
            "rounds": rounds,
            "accepted_tokens": tokens - rounds,
            "mean_acceptance_length": tokens / rounds,
        }
    return usage


def main() -> None:
    """Serve until killed; prints `port N` once listening (`--port 0`: any free port)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--kind", default="openai")
    parser.add_argument("--latency", default="{}", help="Latency fields as JSON")
    parser.add_argument("--ttft-ms", type=float, default=None)
    parser.add_argument("--token-ms", type=float, default=None)
    parser.add_argument("--contention", type=float, default=None)
    parser.add_argument("--serialise", action="store_true")
    parser.add_argument("--fail-from", type=int, default=None)
    args = parser.parse_args()
    fields = json.loads(args.latency)
    for name, value in (("ttft_s", args.ttft_ms), ("token_s", args.token_ms)):
        if value is not None:
            fields[name] = value / 1000
    if args.contention is not None:
        fields["contention"] = args.contention
    fields["serialise"] = fields.get("serialise", False) or args.serialise
    server = FakeLoadServer(
        Latency(**fields), kind=args.kind, fail_from=args.fail_from, port=args.port
    )
    print(f"port {server.httpd.server_address[1]}", flush=True)
    server.httpd.serve_forever()


@contextmanager
def separate_process(latency: Latency, kind: str = "ddtune") -> Iterator[tuple[str, Callable]]:
    """The server in its own process (as real servers are): yields (url, stats())."""
    argv = [sys.executable, __file__, "--kind", kind, "--latency", json.dumps(asdict(latency))]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        url = f"http://127.0.0.1:{int(line.split()[1])}"

        def stats() -> dict:
            with urllib.request.urlopen(url + "/stats", timeout=10) as reply:
                return json.loads(reply.read())

        yield url, stats
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
