"""The streaming client against real loopback servers: recorded streams, timing, failures."""

from __future__ import annotations

import socket

import httpx
import pytest

from ddtune.bench.client import BenchError, RequestSpec, discover_model, stream_request
from ddtune.engines import get_engine

SPEC = RequestSpec("short", 0, "def f(xs):\n", 16)


def _send(url: str, kind: str, **kw):
    with httpx.Client(timeout=10) as client:
        return stream_request(
            client,
            url,
            get_engine(kind),
            SPEC,
            model=kw.get("model", "m"),
            temperature=0.0,
            ignore_eos=kw.get("ignore_eos", True),
        )


def test_recorded_sglang_stream(fake_server_cls) -> None:
    with fake_server_cls(kind="sglang", replay="sglang_generate_stream.txt") as server:
        record = _send(server.url, "sglang")
        body = server.bodies[0]
    assert record.text == "    return sorted(set(xs))\n\n\ndef"  # cumulative chunks become one text
    assert record.output_tokens == 9 and record.tokens_counted_by == "meta_info"
    assert record.prompt_tokens == 27 and record.finish_reason == "length"
    assert len(record.chunk_times_s) == 4
    assert body["sampling_params"] == {"max_new_tokens": 16, "temperature": 0.0, "ignore_eos": True}
    assert body["stream"] is True


def test_recorded_vllm_stream(fake_server_cls) -> None:
    with fake_server_cls(kind="vllm", replay="vllm_completions_stream.txt") as server:
        record = _send(server.url, "vllm")
        body = server.bodies[0]
    assert record.text == "    return sorted(set(xs))\n"
    assert record.output_tokens == 7 and record.tokens_counted_by == "usage"
    assert 0 < record.ttft_s <= record.chunk_times_s[-1] <= record.e2e_s
    assert body["stream_options"] == {"include_usage": True} and body["ignore_eos"] is True
    assert body["model"] == "m" and body["max_tokens"] == 16


def test_openai_kind_does_not_send_ignore_eos(fake_server_cls) -> None:
    with fake_server_cls(kind="openai") as server:
        record = _send(server.url, "openai")
        assert "ignore_eos" not in server.bodies[0]
    assert record.output_tokens == 16


def test_http_error_raises_bench_error(fake_server_cls) -> None:
    with (
        fake_server_cls(fail_request=0) as server,
        pytest.raises(BenchError, match="HTTP 500.*injected fault"),
    ):
        _send(server.url, "ddtune")


def test_connection_refused_raises_bench_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the request: nothing listens
    with pytest.raises(BenchError, match="ConnectError"):
        _send(f"http://127.0.0.1:{port}", "ddtune")


def test_discover_model(fake_server_cls) -> None:
    with fake_server_cls() as server, httpx.Client() as client:
        assert discover_model(client, server.url, get_engine("vllm")) == "fake-model"
        assert discover_model(client, server.url + "/nowhere", get_engine("vllm")) is None
