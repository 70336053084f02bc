"""openai kind: the OpenAI completions stream every OpenAI-compatible kind shares."""

from __future__ import annotations

import json

import httpx

from ddtune.engines import get_engine
from ddtune.params import SamplingParams

OPENAI = get_engine("openai")


def test_completion_request_body():
    sampling = SamplingParams(
        max_new_tokens=16, temperature=0.7, top_p=0.9, seed=1, stop_strings=("\n\n",)
    )
    url, body = OPENAI.generate_request("http://h:1", "def f():", sampling, model="m")
    assert url == "http://h:1/v1/completions"
    assert body == {
        "prompt": "def f():",
        "max_tokens": 16,
        "temperature": 0.7,
        "top_p": 0.9,
        "stream": True,
        "stream_options": {"include_usage": True},
        "model": "m",
        "seed": 1,
        "stop": ["\n\n"],
    }


def test_plain_openai_servers_get_no_extensions_and_defaults_stay_implicit():
    sampling = SamplingParams(max_new_tokens=4, ignore_eos=True)
    _, body = OPENAI.generate_request("http://h", "p", sampling, model=None)
    assert "ignore_eos" not in body and "top_p" not in body and "model" not in body
    assert "seed" not in body and "stop" not in body


def test_stream_chunks_text_finish_and_usage():
    chunk = OPENAI.parse_chunk({"choices": [{"text": " x", "finish_reason": None}]}, "a")
    assert (chunk.text, chunk.finish_reason, chunk.usage) == (" x", None, None)
    end = OPENAI.parse_chunk({"choices": [{"text": "", "finish_reason": "length"}]}, "a x")
    assert (end.text, end.finish_reason) == ("", "length")
    usage = {"completion_tokens": 2, "prompt_tokens": 1}
    last = OPENAI.parse_chunk({"choices": [], "usage": usage}, "a x")
    assert (last.text, last.usage) == ("", usage)


def test_one_token_generation_and_model_name():
    seen = []

    def reply(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "tiny"}]})
        body = json.loads(request.read())
        if (body["max_tokens"], body["temperature"], body["model"]) != (1, 0.0, "tiny"):
            return httpx.Response(400, text="bad")
        return httpx.Response(200, json={"choices": [] if "empty" in str(request.url) else [{}]})

    with httpx.Client(transport=httpx.MockTransport(reply)) as client:
        assert OPENAI.model_name(client, "http://h") == "tiny"
        assert OPENAI.generate_one_token(client, "http://h", "tiny") is None
        assert OPENAI.generate_one_token(client, "http://h/empty", "tiny") == (
            "/v1/completions returned no choices"
        )
        assert OPENAI.generate_one_token(client, "http://h", "other").endswith("400: bad")
    assert {r.url.path for r in seen} == {"/v1/models", "/v1/completions", "/empty/v1/completions"}
