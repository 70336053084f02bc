"""Process lifecycle of `ddtune serve`: TOML config, a full queue, graceful SIGTERM drain,
SIGINT abort after the grace period, exit 0 with no process left, clear start errors."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import httpx
import pytest

from ddtune.cli import main


class StreamReader(threading.Thread):
    """Reads one streaming completion in the background; `.first` is set on its first chunk."""

    def __init__(self, url: str, body: dict) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        self.first = threading.Event()
        self.events: list[str] = []
        self.status = 0

    def run(self) -> None:
        with httpx.Client(timeout=120) as http, http.stream("POST", self.url, json=self.body) as r:
            self.status = r.status_code
            for line in r.iter_lines():
                if line.startswith("data: "):
                    self.events.append(line[6:])
                    self.first.set()

    def completion_tokens(self) -> int:
        chunks = [json.loads(e) for e in self.events if e != "[DONE]"]
        return chunks[-1]["usage"]["completion_tokens"]

    def text_and_reason(self) -> tuple[str, str | None]:
        chunks = [json.loads(e) for e in self.events if e != "[DONE]"]
        choices = [c["choices"][0] for c in chunks if c.get("choices")]
        return "".join(c["text"] for c in choices), choices[-1][
            "finish_reason"
        ] if choices else None


def queue_depth(base_url: str) -> float:
    for line in httpx.get(base_url + "/metrics", timeout=30).text.splitlines():
        if line.startswith("ddtune_queue_depth "):
            return float(line.split()[1])
    raise AssertionError("ddtune_queue_depth missing")


def test_sigterm_drains_in_flight_requests_then_exits_zero(
    server_factory, checkpoint, tmp_path
) -> None:  # noqa: ANN001
    target, drafter = checkpoint
    toml = tmp_path / "serve.toml"
    toml.write_text(
        'mode = "ddtree"\nbudget = 4\ntopk = 2\nmax_queue = 1\nmax_batch = 2\ngrace_seconds = 60\n'
        'model_name = "tiny"\n'
    )
    server = server_factory(
        ["--config", str(toml), "--target", str(target), "--drafter", str(drafter)]
    )
    url = server.base_url
    config = httpx.get(url + "/server_info").json()["config"]
    settings = [config[key] for key in ("budget", "topk", "max_queue", "max_batch")]
    assert settings == [4, 2, 1, 2]

    # 1. Two long requests run in one batch, a short one waits in the queue, a fourth
    #    finds the queue full.
    # long enough (~6 s here) to be still running at the SIGTERM on a loaded machine
    long_tokens = 1500
    long_body = {
        "prompt": "a = 1\n",
        "max_tokens": long_tokens,
        "temperature": 0,
        "ignore_eos": True,
    }
    running = StreamReader(url + "/v1/completions", long_body)
    running.start()
    assert running.first.wait(60)
    beside = StreamReader(url + "/v1/completions", {**long_body, "prompt": "b = 2\n"})
    beside.start()
    assert beside.first.wait(60)
    queued = StreamReader(url + "/v1/completions", {**long_body, "max_tokens": 3})
    queued.start()
    assert server.wait_until(lambda: queue_depth(url) == 1, 30)
    full = httpx.post(url + "/v1/completions", json={"prompt": "b", "max_tokens": 2})
    assert full.status_code == 503 and full.headers["Retry-After"] == "1"
    assert full.json()["error"]["code"] == "queue_full"

    # 2. SIGTERM: health turns 503 and new work is refused while in-flight work goes on.
    os.killpg(server.pgid, signal.SIGTERM)
    sent = time.monotonic()
    assert server.wait_until(lambda: httpx.get(url + "/health").status_code == 503, 10)
    assert running.is_alive(), "the long request should still be in flight"
    refused = httpx.post(url + "/v1/completions", json={"prompt": "c", "max_tokens": 2})
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "shutting_down"

    # 3. All accepted requests finish completely; the process exits 0, nothing left.
    for reader in (running, beside, queued):
        reader.join(60)
    for reader in (running, beside):
        assert reader.text_and_reason()[1] == "length"
        assert reader.completion_tokens() == long_tokens
    assert running.events[-1] == "[DONE]" and queued.text_and_reason()[1] == "length"
    assert server.proc.wait(timeout=60) == 0
    assert time.monotonic() - sent < 60
    assert not server.group_alive()
    assert server.stdout_lines.qsize() == 0  # the ready line was the only stdout line


@pytest.mark.slow  # a second server start; the default suite already covers SIGTERM
def test_sigint_aborts_in_flight_work_after_the_grace_period(server_factory, checkpoint) -> None:  # noqa: ANN001
    target, drafter = checkpoint
    server = server_factory(
        ["--target", str(target), "--drafter", str(drafter), "--mode", "ar", "--grace-seconds", "1"]
    )
    body = {"prompt": "while True:\n", "max_tokens": 1900, "temperature": 0, "ignore_eos": True}
    stream = StreamReader(server.base_url + "/v1/completions", body)
    stream.start()
    assert stream.first.wait(60)
    os.killpg(server.pgid, signal.SIGINT)
    sent = time.monotonic()
    assert server.proc.wait(timeout=30) == 0
    assert time.monotonic() - sent < 1 + 10  # grace + one round + connection close
    stream.join(30)
    text, reason = stream.text_and_reason()
    assert reason == "abort" and text
    assert 0 < stream.completion_tokens() < 1900
    assert stream.events[-1] == "[DONE]"
    assert not server.group_alive()


def test_sigterm_while_loading_exits_zero(server_factory, checkpoint) -> None:  # noqa: ANN001
    target, drafter = checkpoint
    server = server_factory(["--target", str(target), "--drafter", str(drafter)], wait=False)
    assert server.wait_until(lambda: "Started server process" in server.log_path.read_text(), 120)
    os.killpg(server.pgid, signal.SIGTERM)  # listening, weights (most likely) still loading
    assert server.proc.wait(timeout=60) == 0, server.log_tail()
    assert not server.group_alive()


@pytest.mark.parametrize(
    ("models", "args", "message"),
    [
        ("none", ["--target", "/nonexistent/model"], "config.json is missing"),
        ("both", ["--mode", "ddtree", "--budget", "-3"], "budget: must be greater than or equal"),
        ("both", ["--window", "wide"], "window must be a positive integer"),
        ("target", ["--mode", "dflash"], "needs a drafter"),
        ("both", ["--max-batch", "0"], "max_batch: must be greater than or equal to 1"),
        (
            "both",
            ["--budget", "32", "--max-step-tokens", "16"],
            "max_step_tokens 16 is smaller than one request's round of 33 tokens",
        ),
        ("both", ["--mode", "dflash", "--max-step-tokens", "3"], "round of 4 tokens"),
    ],
)
def test_bad_start_is_one_clear_line(models, args, message, checkpoint, capsys) -> None:  # noqa: ANN001
    """Refused before binding a port or loading weights: exit 2, one line on stderr."""
    target, drafter = checkpoint
    model_args = {
        "none": [],
        "target": ["--target", str(target)],
        "both": ["--target", str(target), "--drafter", str(drafter)],
    }[models]
    assert main(["serve", "--port", "0", *model_args, *args]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.startswith("ddtune: error:") and message in out.err
    assert out.err.count("\n") == 1


def test_accepted_connections_send_without_nagle() -> None:
    """The listening socket is a TCP socket by protocol, so asyncio sets TCP_NODELAY on every
    connection: a response written as headers + body no longer waits for the client's delayed
    ACK (a keep-alive `/health` took ~45 ms instead of ~1 ms before)."""
    import asyncio
    import socket

    from ddtune.server.listen import bind

    listener = bind("127.0.0.1", 0)
    seen: list[int] = []

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            server_side = transport.get_extra_info("socket")
            seen.append(server_side.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    async def connect_once() -> None:
        server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
        _, writer = await asyncio.open_connection(*listener.getsockname())
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()

    asyncio.run(connect_once())
    assert seen and seen[0] != 0
