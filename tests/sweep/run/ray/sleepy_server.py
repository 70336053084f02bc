"""A FAKE ddtune server whose response time is sleeping, not CPU (stdlib only; tests only).

    python sleepy_server.py --port P --mode ddtree --budget 8 --topk 2 --window none
        [--token-delay 0.05] [--load-delay 0.2]

It answers what the `ddtune` kind's readiness protocol and bench ask:
GET /health_generate, /server_info (a fresh instance_id, the launch config),
/v1/models; POST /v1/completions (a JSON reply, or an SSE stream with
`usage.spec` when `stream` is set). Output texts are a function of the prompt
only, so every configuration and every slot gives the same T=0 outputs. Each
streamed token sleeps `--token-delay`; the port is bound after `--load-delay`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mode", default="ddtree")
    p.add_argument("--budget", type=int, default=16)
    p.add_argument("--topk", type=int, default=4)
    p.add_argument("--window", default="none")
    p.add_argument("--token-delay", type=float, default=0.05)
    p.add_argument("--load-delay", type=float, default=0.2)
    return p.parse_args()


def tokens_for(prompt: str, count: int) -> list[str]:
    digest = hashlib.sha256(prompt.encode()).hexdigest()
    return [f" t{digest[i % 60 : i % 60 + 3]}" for i in range(count)]


def make_handler(args: argparse.Namespace, info: dict) -> type[BaseHTTPRequestHandler]:
    """The request handler class bound to the command line and the /server_info reply."""
    return type("Handler", (Handler,), {"args": args, "info": info})


class Handler(BaseHTTPRequestHandler):
    """The endpoints; `args` and `info` are set by make_handler."""

    protocol_version = "HTTP/1.0"
    args: argparse.Namespace
    info: dict

    def log_message(self, fmt: str, *rest: object) -> None:
        pass

    def send_json(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        replies = {
            "/health_generate": {},
            "/server_info": self.info,
            "/v1/models": {"data": [{"id": "sleepy"}]},
        }
        if self.path in replies:
            self.send_json(replies[self.path])
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/completions":
            return self.send_error(404)
        tokens = tokens_for(body["prompt"], int(body.get("max_tokens", 1)))
        if not body.get("stream"):
            return self.send_json({"choices": [{"index": 0, "text": "".join(tokens)}]})
        self.stream(tokens, len(body["prompt"]) // 4)

    def stream(self, tokens: list[str], prompt_tokens: int) -> None:
        """One SSE event a token, each after --token-delay, then usage with a spec block."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i, token in enumerate(tokens):
            time.sleep(self.args.token_delay)
            finish = "length" if i == len(tokens) - 1 else None
            self.event({"choices": [{"index": 0, "text": token, "finish_reason": finish}]})
        rounds = max(1, len(tokens) // 2)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(tokens),
            "spec": {
                "rounds": rounds,
                "accepted_tokens": len(tokens) - rounds,
                "mean_acceptance_length": len(tokens) / rounds,
            },
        }
        self.event({"choices": [], "usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")

    def event(self, payload: dict) -> None:
        self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
        self.wfile.flush()


def main() -> None:
    args = parse_args()
    window = None if args.window == "none" else int(args.window)
    config = {"mode": args.mode, "budget": args.budget, "topk": args.topk, "window": window}
    time.sleep(args.load_delay)
    info = {
        "instance_id": uuid.uuid4().hex,
        "pid": os.getpid(),
        "started_at": time.time(),
        "ready_at": time.time(),
        "config": config,
        "config_hash": hashlib.sha256(json.dumps(config).encode()).hexdigest()[:16],
        "config_generation": 1,
        "model": "sleepy",
        "target_sha256": "0" * 64,
    }
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args, info))
    print(f"ready port={args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
