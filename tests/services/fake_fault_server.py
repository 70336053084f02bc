"""A FAKE model server for fault-injection tests (stdlib only; never used in production).

It speaks just enough of the ddtune/SGLang/vLLM/OpenAI endpoints for the
readiness protocol, and misbehaves on demand:

    --bind-delay S            bind the port only after S seconds
    --ready-delay S           health/completions answer 503 for S seconds after bind
    --models-before-ready     /v1/models answers 200 while still loading
    --linger-after-term S     after SIGTERM keep serving (old identity) for S seconds
    --ignore-term             ignore SIGTERM
    --crash-during-load CODE  exit with CODE while loading (after --crash-after S)
    --oom                     print a CUDA OOM message while loading and die
    --orphan-holds-port       double-fork a setsid orphan that keeps the listening socket
    --children N              fork N children (same process group) that keep the socket
    --gpu-ledger DIR          write a fake GPU allocation (--gpu-mib) to DIR/<pid>.json,
    --gpu-release-after S     ... released S seconds after exit, or "never"
    --report-config JSON      report these config keys instead of the requested ones
    --speculative-draft-model-path P   the drafter (SGLang's flag; its server info reports it)
    --sglang 0.5.23|legacy    answer as SGLang: 0.5.23's /server_info (its field names, with
                              the DDTree PR's budget), or an older one's /get_server_info only
                              (/server_info 404, the window as speculative_dflash_draft_window_size)
                              (without it: /server_info is ddtune's, /get_server_info the legacy one)
    --report-drafter P        report drafter P instead
    --instance-id ID          report a fixed instance id (e.g. persisted across restarts)
    --hang-after S            SIGSTOP itself S seconds after start
    --hot / --hot-ignore      accept POST /v1/ddtree/config (or accept it and change nothing)
    --token-delay S           sleep S seconds before each streamed token (a known throughput)
    --speculative-config JSON answer as vLLM's dev-mode `/server_info?config_format=json`:
                              `vllm_config.speculative_config` is this JSON (without: null)
    --target P / --drafter P  accepted and ignored (the model folders a spec names)

`stream: true` completions answer an OpenAI SSE stream of `max_tokens` chunks
" x" with `usage.spec`, enough for the bench (so sweeps can run against it).

It prints `ready instance_id=... port=...` when ready. With $FAKE_COUNT_STARTS set it
appends each start's arguments (JSON) to that file first: tests count starts by it. With
$FAKE_FAIL_IF set, every start exits 3 while that file exists (a fault of the service).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--mode", default="ddtree")
    p.add_argument("--budget", type=int, default=16)
    p.add_argument("--topk", type=int, default=4)
    p.add_argument("--window", default="none")
    p.add_argument("--bind-delay", type=float, default=0.0)
    p.add_argument("--ready-delay", type=float, default=0.0)
    p.add_argument("--models-before-ready", action="store_true")
    p.add_argument("--linger-after-term", type=float, default=0.0)
    p.add_argument("--ignore-term", action="store_true")
    p.add_argument("--crash-during-load", type=int, default=None)
    p.add_argument("--crash-after", type=float, default=0.3)
    p.add_argument("--oom", action="store_true")
    p.add_argument("--orphan-holds-port", action="store_true")
    p.add_argument("--children", type=int, default=0)
    p.add_argument("--gpu-ledger", default=None)
    p.add_argument("--gpu-mib", type=float, default=1000.0)
    p.add_argument("--gpu-release-after", default="0")
    p.add_argument("--report-config", default=None)
    p.add_argument("--speculative-draft-model-path", default=None)
    p.add_argument("--report-drafter", default=None)
    p.add_argument("--sglang", choices=("0.5.23", "legacy"), default=None)
    p.add_argument("--instance-id", default=None)
    p.add_argument("--hang-after", type=float, default=None)
    p.add_argument("--hot", action="store_true")
    p.add_argument("--hot-ignore", action="store_true")
    p.add_argument("--token-delay", type=float, default=0.0)
    p.add_argument("--speculative-config", default=None)
    p.add_argument("--target", default=None)
    p.add_argument("--drafter", default=None)
    p.add_argument("--schedule", default=None)  # as `ddtune serve --schedule`: reported back
    return p.parse_args()


class State:
    """Identity, config and load progress of this fake instance."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.instance_id = args.instance_id or uuid.uuid4().hex
        window = None if args.window == "none" else int(args.window)
        self.config = {
            "mode": args.mode,
            "budget": args.budget,
            "topk": args.topk,
            "window": window,
        }
        self.generation = 1
        self.started_at = time.time()
        self.ready_at: float | None = None
        self.lock = threading.Lock()

    @property
    def ready(self) -> bool:
        return self.ready_at is not None

    def reported_config(self) -> dict:
        extra = json.loads(self.args.report_config) if self.args.report_config else {}
        if self.args.schedule:  # a missing or bad file fails at start, as ddtune serve's does
            with open(self.args.schedule) as handle:
                extra["schedule"] = json.load(handle)["schedule"]
        return {**self.config, **extra}

    def server_info(self) -> dict:
        config = self.reported_config()
        digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
        return {
            "instance_id": self.instance_id,
            "pid": os.getpid(),
            "started_at": self.started_at,
            "ready_at": self.ready_at,
            "config": config,
            "config_hash": digest,
            "config_generation": self.generation,
        }

    def sglang_info(self) -> dict:
        config = self.reported_config()
        algo = {"ar": None, "dflash": "DFLASH", "ddtree": "DDTREE"}[config["mode"]]
        window = "speculative_dflash_draft_window_size"
        info = {
            "speculative_algorithm": algo,
            "speculative_draft_model_path": (
                (self.args.report_drafter or self.args.speculative_draft_model_path)
                if algo
                else None
            ),
            "speculative_ddtree_budget": config["budget"] if algo == "DDTREE" else None,
        }
        if self.args.sglang == "0.5.23":
            window = "speculative_draft_window_size"
            info["version"] = "0.5.23"
        info[window] = config["window"] if algo else None
        return info

    def vllm_info(self) -> dict:
        """vLLM's dev-mode `/server_info?config_format=json`: the speculative config it runs."""
        spec = self.args.speculative_config
        return {"vllm_config": {"speculative_config": json.loads(spec) if spec else None}}

    def answer_info(self, path: str) -> tuple[int, dict]:
        """/server_info and /get_server_info as the flavour asked for answers them."""
        sglang = self.args.sglang
        if path == "/server_info" and sglang == "legacy":
            return 404, {"detail": "Not Found"}
        if path == "/server_info":
            return 200, self.sglang_info() if sglang else self.server_info()
        return 200, self.sglang_info()


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    """The request handler class bound to `state`."""
    return type("Handler", (Handler,), {"state": state})


LOADING = {"error": "loading"}
NOT_FOUND = {"error": "not found"}
CONFIG_KEYS = ("mode", "budget", "topk", "window")


class Handler(BaseHTTPRequestHandler):
    """The endpoints, answered from `state` (set by make_handler)."""

    state: State

    def log_message(self, fmt: str, *args: object) -> None:  # keep the log short
        pass

    def send_json(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if path == "/server_info" and "config_format=json" in query:
            return self.send_json(200, self.state.vllm_info())
        routes = {
            "/health": self.health,
            "/health_generate": self.health,
            "/server_info": lambda: self.send_json(*self.state.answer_info("/server_info")),
            "/get_server_info": lambda: self.send_json(*self.state.answer_info("/get_server_info")),
            "/v1/models": self.models,
        }
        routes.get(self.path, self.not_found)()

    def health(self) -> None:
        ready = self.state.ready
        self.send_json(200 if ready else 503, {} if ready else LOADING)

    def models(self) -> None:
        ok = self.state.ready or self.state.args.models_before_ready
        self.send_json(200 if ok else 503, {"data": [{"id": "fake-model"}]} if ok else LOADING)

    def not_found(self) -> None:
        self.send_json(404, NOT_FOUND)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        routes = {"/v1/completions": self.complete, "/v1/ddtree/config": self.reconfigure}
        routes.get(self.path, lambda _: self.not_found())(body)

    def complete(self, body: dict) -> None:
        if not self.state.ready:
            self.send_json(503, LOADING)
        elif body.get("stream"):
            self.stream(int(body.get("max_tokens") or 1))
        else:
            choice = {"index": 0, "text": " x", "finish_reason": "length"}
            self.send_json(200, {"choices": [choice]})

    def reconfigure(self, body: dict) -> None:
        """POST /v1/ddtree/config with --hot (with --hot-ignore: accepted, nothing changes)."""
        state = self.state
        if not state.args.hot:
            return self.not_found()
        with state.lock:
            if not state.args.hot_ignore:
                state.config.update({k: body[k] for k in CONFIG_KEYS if k in body})
                state.generation += 1
            info = state.server_info()
        self.send_json(200, {k: info[k] for k in ("config", "config_hash", "config_generation")})

    def stream(self, tokens: int) -> None:
        """An OpenAI completions SSE stream, then usage (with ddtune's spec block)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i in range(tokens):
            time.sleep(self.state.args.token_delay)
            done = "length" if i == tokens - 1 else None
            self.event({"choices": [{"index": 0, "text": " x", "finish_reason": done}]})
        spec = {"rounds": tokens, "accepted_tokens": 0, "mean_acceptance_length": 1.0}
        usage = {"prompt_tokens": 1, "completion_tokens": tokens, "spec": spec}
        self.event({"choices": [], "usage": {**usage, "total_tokens": tokens + 1}})
        self.wfile.write(b"data: [DONE]\n\n")

    def event(self, payload: dict) -> None:
        self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
        self.wfile.flush()


def say(text: str) -> None:
    print(text, flush=True)


def fork_holders(server: ThreadingHTTPServer, children: int, orphan: bool) -> None:
    """Children in our process group, and/or a setsid grandchild, that keep the socket open."""
    for _ in range(children):
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            while True:
                time.sleep(3600)
    if orphan:
        pid = os.fork()
        if pid == 0:
            os.setsid()
            if os.fork() == 0:
                say(f"orphan pid={os.getpid()}")
                while True:
                    time.sleep(3600)
            os._exit(0)
        os.waitpid(pid, 0)


def write_ledger(args: argparse.Namespace) -> None:
    if not args.gpu_ledger:
        return
    release = None if args.gpu_release_after == "never" else float(args.gpu_release_after)
    entry = {"pid": os.getpid(), "mib": args.gpu_mib, "release_after": release}
    with open(os.path.join(args.gpu_ledger, f"{os.getpid()}.json"), "w") as handle:
        json.dump(entry, handle)


def install_term_handler(args: argparse.Namespace, server: ThreadingHTTPServer) -> None:
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        return

    def on_term(signum: int, frame: object) -> None:
        say(f"SIGTERM received; exiting in {args.linger_after_term}s")
        threading.Timer(args.linger_after_term, lambda: os._exit(0)).start()

    signal.signal(signal.SIGTERM, on_term)


def load(args: argparse.Namespace, state: State) -> None:
    """The fake model load: fail, or become ready after --ready-delay."""
    say("loading model")
    if args.oom:
        time.sleep(args.crash_after)
        say("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB")
        os._exit(1)
    if args.crash_during_load is not None:
        time.sleep(args.crash_after)
        say(f"RuntimeError: fake load failure, exiting with {args.crash_during_load}")
        os._exit(args.crash_during_load)
    time.sleep(args.ready_delay)
    state.ready_at = time.time()
    say(f"ready instance_id={state.instance_id} port={args.port}")


def count_start() -> None:
    """$FAKE_COUNT_STARTS: append one line per start (its argv as JSON), crashing ones too."""
    ledger = os.environ.get("FAKE_COUNT_STARTS")
    if ledger:
        with open(ledger, "a") as out:
            out.write(json.dumps(sys.argv[1:]) + "\n")


def fail_if_told() -> None:
    """$FAKE_FAIL_IF: while that file exists, every start fails (a fault outside the config)."""
    flag = os.environ.get("FAKE_FAIL_IF")
    if flag and os.path.exists(flag):
        say("error: no space left on device (the FAKE fault: $FAKE_FAIL_IF exists)")
        sys.exit(3)


def main() -> None:
    count_start()
    fail_if_told()
    args = parse_args()
    say(f"fake fault server pid={os.getpid()} pgid={os.getpgid(0)}")
    if args.schedule and not os.path.isfile(args.schedule):
        say(f"schedule file not found: {args.schedule}")
        sys.exit(2)
    if args.hang_after is not None:
        threading.Timer(args.hang_after, lambda: os.kill(os.getpid(), signal.SIGSTOP)).start()
    time.sleep(args.bind_delay)
    state = State(args)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(state))
    server.daemon_threads = True
    fork_holders(server, args.children, args.orphan_holds_port)
    install_term_handler(args, server)
    write_ledger(args)
    threading.Thread(target=load, args=(args, state), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
