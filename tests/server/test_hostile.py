"""Issue 14 on a live `ddtune serve`: the hostile-request table (every case a 4xx in the
OpenAI error shape, the server still serving after each, memory bounded), the body
limit (413 without reading the body, `/health` fast meanwhile), the body deadline (408,
connection closed) and uploads cut short (one log line each, no traceback)."""

from __future__ import annotations

import http.client
import json
import socket
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest

sys.path.insert(0, str(Path(__file__).parent))

import hostile_cases  # noqa: E402
import rawhttp  # noqa: E402
from hostile_cases import CASES, LIMIT, Case  # noqa: E402

GUARD_TIMEOUT = 2.0  # = conftest.GUARD_TIMEOUT
NORMAL = {"prompt": "def f(x):", "max_tokens": 1, "temperature": 0}


def send(server, case: Case) -> rawhttp.RawResponse:  # noqa: ANN001 - the ServerProcess fixture
    return rawhttp.request(
        server.port, case.method, case.path, case.body, case.headers, chunked=case.chunked
    )


def serves_normally(server) -> bool:  # noqa: ANN001
    response = httpx.post(server.base_url + "/v1/completions", json=NORMAL, timeout=60)
    return response.status_code == 200 and response.json()["usage"]["completion_tokens"] == 1


def rss(server) -> int:  # noqa: ANN001
    return psutil.Process(server.proc.pid).memory_info().rss


def test_the_table_covers_the_issue() -> None:
    assert LIMIT == 1_000_000 and len(CASES) >= 40
    assert len({case.name for case in CASES}) == len(CASES)
    names = " ".join(case.name for case in CASES)
    for needle in ("surrogate in prompt", "100000 deep", "5000-digit", "over the limit", "' 12 '"):
        assert needle in names


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_request_is_a_clean_4xx(guarded_server, case: Case) -> None:  # noqa: ANN001
    response = send(guarded_server, case)
    assert response.status == case.status, response.body[:300]
    error = json.loads(response.body)["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert error["code"] == case.code, error
    if case.param is not None:
        assert error["param"] == case.param, error
    assert serves_normally(guarded_server)


def test_memory_stays_bounded_under_repeated_big_requests(guarded_server) -> None:  # noqa: ANN001
    big = [case for case in CASES if len(case.body) > 100_000 or case.headers]
    assert len(big) >= 5
    send(guarded_server, big[0])  # first use of each code path allocates once
    before = rss(guarded_server)
    for _ in range(3):
        for case in big:
            assert send(guarded_server, case).status == case.status
    assert serves_normally(guarded_server)
    growth = rss(guarded_server) - before
    assert growth < 100 * 2**20, f"RSS grew by {growth / 2**20:.0f} MiB"


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_health_answers_fast_while_a_10mb_body_is_rejected(guarded_server, chunked) -> None:  # noqa: ANN001
    body = b'{"prompt": "' + b"x" * 10_000_000 + b'"}'
    box: list[rawhttp.RawResponse] = []

    def upload() -> None:
        box.append(
            rawhttp.request(
                guarded_server.port, "POST", hostile_cases.C, body, chunked=chunked, pause=0.02
            )
        )

    uploader = threading.Thread(target=upload)
    latencies = []
    with httpx.Client(base_url=guarded_server.base_url, timeout=10) as http:
        assert http.get("/health").status_code == 200  # connection open before the upload
        uploader.start()
        while uploader.is_alive() or len(latencies) < 5:
            started = time.perf_counter()
            assert http.get("/health").status_code == 200
            latencies.append(time.perf_counter() - started)
    uploader.join()
    response = box[0]
    assert (
        response.status == 413 and json.loads(response.body)["error"]["code"] == "request_too_large"
    )
    assert response.headers.get("connection") == "close"
    # Answered at once from the declared length, or as soon as LIMIT bytes came in: the
    # client stops sending then (a piece or two in flight, plus kernel socket buffers).
    assert response.sent <= (2 * 65536 if not chunked else LIMIT + 4 * 2**20), response.sent
    assert max(latencies) < 0.1, sorted(latencies)[-5:]


def partial_upload(port: int) -> socket.socket:
    """A request that promises 1000 body bytes and sends 10."""
    sock = rawhttp.connect(port, timeout=30)
    head = rawhttp.head(
        "POST", hostile_cases.C, {"Content-Type": "application/json", "Content-Length": "1000"}
    )
    sock.sendall(head + b'{"prompt":')
    return sock


def test_slow_bodies_get_408_and_their_connections_closed(guarded_server) -> None:  # noqa: ANN001
    started = time.monotonic()
    socks = [partial_upload(guarded_server.port) for _ in range(30)]
    try:
        for sock in socks:
            response = http.client.HTTPResponse(sock)
            response.begin()
            assert response.status == 408
            assert json.loads(response.read())["error"]["code"] == "request_timeout"
            assert sock.recv(1) == b""  # closed by the server
        elapsed = time.monotonic() - started
    finally:
        for sock in socks:
            sock.close()
    assert GUARD_TIMEOUT * 0.9 <= elapsed < GUARD_TIMEOUT + 15
    assert serves_normally(guarded_server)


def test_a_client_dropping_mid_upload_is_one_log_line(guarded_server) -> None:  # noqa: ANN001
    before = guarded_server.log_tail(10_000)
    for _ in range(5):
        partial_upload(guarded_server.port).close()

    def new_log() -> str:
        return guarded_server.log_tail(10_000)[len(before) :]

    assert guarded_server.wait_until(
        lambda: new_log().count("client disconnected during upload") == 5, 15
    ), new_log()
    assert "Traceback" not in new_log() and "unhandled" not in new_log()
    assert len(new_log().strip().splitlines()) == 5
    assert serves_normally(guarded_server)
