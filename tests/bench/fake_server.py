"""FakeLLMServer: a real loopback HTTP server that speaks the response shapes of
ddtune, SGLang and vLLM without a model, for testing the bench client.

It is a fake (no model behind it): texts are a deterministic function of the
prompt, speculation statistics follow a fixed rule (chunks of `tokens_per_round`
tokens; each chunk is one verify round), and faults can be injected. It either
generates streams in those shapes or replays a recorded SSE fixture verbatim.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


class FakeLLMServer:
    def __init__(
        self,
        kind: str = "ddtune",
        tokens_per_round: int = 3,
        completions: dict | None = None,
        replay: str | None = None,
        fail_request: int | None = None,
        salt: str = "",
        delay_s: float = 0.001,
    ) -> None:
        self.kind = kind
        self.tokens_per_round = tokens_per_round
        self.completions = completions or {}  # prompt -> completion text (coding tasks)
        self.replay = (FIXTURES / replay).read_text() if replay else None
        self.fail_request = fail_request  # 0-based index of a POST answered with HTTP 500
        self.salt = salt  # changes every output (a "lossy" server)
        self.delay_s = delay_s
        self.bodies: list[dict] = []
        self.counters = {"drafts": 0.0, "accepted": 0.0}
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeLLMServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    # -- generation rule ------------------------------------------------------
    def tokens_for(self, prompt: str, max_tokens: int) -> list[str]:
        if prompt in self.completions:
            text = self.completions[prompt]
            return [text[i : i + 4] for i in range(0, len(text), 4)][:max_tokens]
        digest = hashlib.sha256((self.salt + prompt).encode()).hexdigest()
        return [f" t{digest[i % 60 : i % 60 + 3]}" for i in range(max_tokens)]

    def metrics_text(self) -> str:
        lines = []
        for name, key in (
            ("spec_decode_num_drafts", "drafts"),
            ("spec_decode_num_accepted_tokens", "accepted"),
        ):
            lines += [
                f"# TYPE vllm:{name}_total counter",
                f'vllm:{name}_total{{engine="0",model_name="fake"}} {self.counters[key]}',
            ]
        return "\n".join(lines) + "\n"


def _handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    """The request handler class bound to `server`."""
    return type("Handler", (_Handler,), {"fake": server})


INFO_ROUTES = {
    "/v1/models": {"object": "list", "data": [{"id": "fake-model", "object": "model"}]},
    "/server_info": {"instance_id": "fake-instance", "pid": 1, "config": {"mode": "ddtree"}},
    "/get_model_info": {"model_path": "fake-model", "is_generation": True},
}


class _Handler(BaseHTTPRequestHandler):
    """Answers for `fake`: the info routes, vLLM's /metrics, and completions in every shape."""

    fake: FakeLLMServer

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/metrics" and self.fake.kind == "vllm":
            return self._send(200, self.fake.metrics_text().encode(), "text/plain; version=0.0.4")
        if self.path in INFO_ROUTES:
            return self._send(200, json.dumps(INFO_ROUTES[self.path]).encode(), "application/json")
        self._send(404, b'{"error": "not found"}', "application/json")

    def do_POST(self) -> None:
        server = self.fake
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with server.lock:
            number = len(server.bodies)
            server.bodies.append({"path": self.path, **body})
        if number == server.fail_request:
            return self._send(500, b'{"error": {"message": "injected fault"}}', "application/json")
        if body.get("logprobs") and not body.get("stream"):
            return self._complete_with_logprobs(body)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if server.replay is not None:
            return self._write(server.replay)
        if self.path == "/generate":
            return self._stream_sglang(body)
        self._stream_openai(body)

    def _complete_with_logprobs(self, body: dict) -> None:
        """A non-streamed completion whose token i has top-1/top-2 gap 0.5 * i nats."""
        tokens = self.fake.tokens_for(body["prompt"], body["max_tokens"])
        offsets = [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]
        tops = [{t: -0.25, "\u2400alt": -0.25 - 0.5 * i} for i, t in enumerate(tokens)]
        logprobs = {"tokens": tokens, "top_logprobs": tops, "text_offset": offsets}
        choice = {"index": 0, "text": "".join(tokens), "logprobs": logprobs}
        reply = {"object": "text_completion", "choices": [choice]}
        self._send(200, json.dumps(reply).encode(), "application/json")

    def _stream_openai(self, body: dict) -> None:
        server = self.fake
        tokens = server.tokens_for(body["prompt"], body["max_tokens"])
        rounds = _chunks(tokens, server.tokens_per_round)
        for i, chunk in enumerate(rounds):
            finish = "length" if i == len(rounds) - 1 else None
            self._event(
                {
                    "object": "text_completion",
                    "choices": [{"index": 0, "text": "".join(chunk), "finish_reason": finish}],
                }
            )
        usage = {"prompt_tokens": len(body["prompt"]) // 3, "completion_tokens": len(tokens)}
        if server.kind == "ddtune":
            usage["spec"] = {
                "rounds": len(rounds),
                "accepted_tokens": len(tokens) - len(rounds),
                "mean_acceptance_length": len(tokens) / len(rounds),
            }
        with server.lock:
            server.counters["drafts"] += len(rounds)
            server.counters["accepted"] += len(tokens) - len(rounds)
        if (body.get("stream_options") or {}).get("include_usage"):
            self._event({"object": "text_completion", "choices": [], "usage": usage})
        self._write("data: [DONE]\n\n")

    def _stream_sglang(self, body: dict) -> None:
        params = body["sampling_params"]
        tokens = self.fake.tokens_for(body["text"], params["max_new_tokens"])
        rounds = _chunks(tokens, self.fake.tokens_per_round)
        text, count = "", 0
        for i, chunk in enumerate(rounds):
            text, count = text + "".join(chunk), count + len(chunk)
            meta = {"prompt_tokens": 10, "completion_tokens": count, "finish_reason": None}
            if i == len(rounds) - 1:
                meta.update(
                    finish_reason={"type": "length", "length": count},
                    spec_verify_ct=len(rounds),
                )
            self._event({"text": text, "meta_info": meta, "index": 0})
        self._write("data: [DONE]\n\n")

    def _event(self, payload: dict) -> None:
        time.sleep(self.fake.delay_s)
        self._write(f"data: {json.dumps(payload)}\n\n")

    def _write(self, text: str) -> None:
        self.wfile.write(text.encode())
        self.wfile.flush()

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _chunks(tokens: list[str], size: int) -> list[list[str]]:
    return [tokens[i : i + size] for i in range(0, len(tokens), size)] or [[]]
