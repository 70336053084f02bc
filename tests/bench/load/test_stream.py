"""LeanStreamer (the load generator's http.client transport) reads streams exactly as
`stream_request` (httpx) does, reuses one connection per thread, and fails the same way."""

from __future__ import annotations

import time

import httpx
import pytest

from ddtune.bench.client import BenchError, RequestSpec, stream_request
from ddtune.bench.load.stream import LeanStreamer
from ddtune.engines import get_engine

SPEC = RequestSpec("short", 0, "def f(x):\n", 10, 0)
OPTIONS = {"model": "fake-model", "temperature": 0.0, "ignore_eos": True}


@pytest.mark.parametrize(
    ("kind", "replay"),
    [
        ("ddtune", None),
        ("sglang", None),
        ("vllm", "vllm_completions_stream.txt"),
        ("sglang", "sglang_generate_stream.txt"),
    ],
)
def test_same_record_as_the_httpx_client(fake_server_cls, kind: str, replay: str | None) -> None:
    engine_ = get_engine(kind)
    with fake_server_cls(kind=kind, replay=replay) as server, httpx.Client() as client:
        reference = stream_request(client, server.url, engine_, SPEC, **OPTIONS)
        streamer = LeanStreamer(timeout_s=10)
        try:
            lean = streamer.stream(engine_, server.url, SPEC, **OPTIONS)
        finally:
            streamer.close()
        bodies = server.bodies
    assert bodies[0] == bodies[1]  # the same request
    for name in ("text", "output_tokens", "tokens_counted_by", "prompt_tokens", "finish_reason"):
        assert getattr(lean, name) == getattr(reference, name), name
    assert lean.usage == reference.usage and lean.meta_info == reference.meta_info
    assert lean.chunk_tokens == reference.chunk_tokens
    assert len(lean.chunk_times_s) == len(reference.chunk_times_s) > 0
    assert lean.ttft_s is not None and 0 < lean.ttft_s <= lean.e2e_s


def test_one_keep_alive_connection_per_thread(load_server) -> None:
    server_cls, latency = load_server
    kind = get_engine("ddtune")
    with server_cls(latency(ttft_s=0.001, token_s=0.001)) as server:
        streamer = LeanStreamer(timeout_s=10)
        try:
            records = [streamer.stream(kind, server.url, SPEC, **OPTIONS) for _ in range(5)]
            assert len(streamer.connections) == 1
        finally:
            streamer.close()
    assert all(r.output_tokens == 10 and r.finish_reason == "length" for r in records)


def test_a_connection_the_server_closed_while_idle_is_replaced(load_server) -> None:
    server_cls, latency = load_server
    kind = get_engine("ddtune")
    with server_cls(latency(ttft_s=0.001, token_s=0.001), drop_idle=True) as server:
        streamer = LeanStreamer(timeout_s=10)
        try:
            records = []
            for _ in range(4):
                records.append(streamer.stream(kind, server.url, SPEC, **OPTIONS))
                time.sleep(0.05)  # the server has closed the connection by now
        finally:
            streamer.close()
        posts = server.posts
    assert posts == 4 and all(r.output_tokens == 10 for r in records)


def test_http_errors_and_refused_connections_raise_bench_error(fake_server_cls) -> None:
    kind = get_engine("ddtune")
    streamer = LeanStreamer(timeout_s=5)
    try:
        with fake_server_cls(fail_request=0) as server:
            with pytest.raises(BenchError, match=r"HTTP 500 from .*injected fault"):
                streamer.stream(kind, server.url, SPEC, **OPTIONS)
            url = server.url
        with pytest.raises(BenchError, match="short request 0: ConnectionRefusedError"):
            streamer.stream(kind, url, SPEC, **OPTIONS)
    finally:
        streamer.close()
