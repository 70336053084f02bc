"""ddtune kind: /server_info identity, canonical config comparison, usage.spec acceptance."""

from __future__ import annotations

import httpx
import pytest

from ddtune.bench.client import StreamRecord
from ddtune.engines import Launch, get_engine
from ddtune.engines.ddtune import IDENTITY_KEYS
from ddtune.params import DecodeParams, SamplingParams

DDTUNE = get_engine("ddtune")
INFO = {
    "instance_id": "i-1",
    "pid": 42,
    "config": {"mode": "ddtree", "budget": 16, "topk": 4, "window": "none", "block_size": 8},
    "config_generation": 0,
    "state": "serving",
}


def client_for(info: dict) -> httpx.Client:
    def reply(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/server_info":
            return httpx.Response(200, json=info)
        return httpx.Response(404)

    return httpx.Client(transport=httpx.MockTransport(reply))


def test_identity_and_config_come_from_server_info():
    with client_for(INFO) as client:
        identity, info = DDTUNE.read_identity(client, "http://h", Launch())
    assert set(identity) == {*IDENTITY_KEYS, "config"}
    assert (identity["instance_id"], identity["pid"]) == ("i-1", 42)
    assert "state" not in identity and info == INFO
    assert DDTUNE.config_mismatches(DecodeParams("ddtree", 16, 4, None), info) == []


def test_config_comparison_uses_canonical_forms():
    ar_reported = {"config": {"mode": "ar", "budget": 0, "topk": 1}}
    assert DDTUNE.config_mismatches(DecodeParams("ar", budget=16), ar_reported) == []
    windowed = {"config": {"mode": "ddtree", "window": 64}}
    assert DDTUNE.config_mismatches(DecodeParams("ddtree", window=None), windowed) == [
        "window: requested 'none', server reports 64"
    ]


@pytest.mark.parametrize(
    "info", [{"config": {"mode": "beam"}}, {"config": None}, {}, {"config": {"window": "7"}}]
)
def test_an_unreadable_reported_config_is_a_mismatch_not_a_crash(info):
    (line,) = DDTUNE.config_mismatches(DecodeParams(), info)
    assert line.startswith("the config /server_info reports is not valid")


def test_usage_spec_gives_the_acceptance_of_one_response():
    spec = {"rounds": 3, "accepted_tokens": 5, "mean_acceptance_length": 8 / 3}
    record = StreamRecord(usage={"completion_tokens": 8, "spec": spec})
    assert DDTUNE.response_acceptance(record) == (pytest.approx(8 / 3), 3.0)
    assert DDTUNE.response_acceptance(StreamRecord(usage={"completion_tokens": 5})) == (None, 0.0)
    no_rounds = StreamRecord(usage={"spec": {**spec, "rounds": 0}})
    assert DDTUNE.response_acceptance(no_rounds) == (None, 0.0)


def test_requests_carry_the_ignore_eos_extension():
    sampling = SamplingParams(max_new_tokens=4, seed=3, ignore_eos=True)
    url, body = DDTUNE.generate_request("http://h", "p", sampling, model="m")
    assert url == "http://h/v1/completions"
    assert body["ignore_eos"] is True and body["seed"] == 3 and body["model"] == "m"
    assert DDTUNE.health_url("http://h") == "http://h/health_generate"
