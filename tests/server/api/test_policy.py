"""Issue 15 on a live `ddtune serve`: the request policy as clients meet it (unknown fields
reported, vLLM streaming options, the four prompt forms), the OpenAPI document and the
response models it promises, `models.retrieve`, `Allow` on 405, `refusal: null`, no empty
first chunk; and `--strict-requests` on an in-process app."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from fastapi.testclient import TestClient

from ddtune.server.api.generation import IGNORED_HEADER
from ddtune.server.api.schema import (
    ChatCompletionResponse,
    CompletionResponse,
    ErrorResponse,
    ModelCard,
    ModelList,
)
from ddtune.server.app import create_app
from ddtune.server.config import ServeConfig
from ddtune.server.state import ServerState

PROMPT = "def add(a, b):\n"
CHAT = [{"role": "user", "content": "sum 2 3"}]


def client(server) -> openai.OpenAI:  # noqa: ANN001 - the ServerProcess fixture
    return openai.OpenAI(
        base_url=server.base_url + "/v1", api_key="none", max_retries=0, timeout=120
    )


def post(server, path: str, body: dict) -> httpx.Response:  # noqa: ANN001
    return httpx.post(server.base_url + path, json=body, timeout=120)


def sse_events(server, path: str, body: dict) -> list[dict]:  # noqa: ANN001
    with httpx.stream("POST", server.base_url + path, json=body, timeout=120) as response:
        assert response.status_code == 200
        data = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [json.loads(d) for d in data[:-1]]


def test_openapi_documents_request_and_response_bodies(server) -> None:  # noqa: ANN001
    schema = httpx.get(server.base_url + "/openapi.json", timeout=30).json()
    components = schema["components"]["schemas"]
    for name in ("CompletionBody", "ChatBody", "ConfigBody", "CompletionResponse", "ErrorResponse"):
        assert name in components
    completions = schema["paths"]["/v1/completions"]["post"]
    body = completions["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/CompletionBody"}
    assert set(completions["responses"]["200"]["content"]) == {
        "application/json",
        "text/event-stream",
    }
    assert "prompt" in components["CompletionBody"]["required"]
    assert components["CompletionBody"]["properties"]["n"]["enum"] == [1]  # neutral-only
    assert "/v1/models/{model_id}" in schema["paths"]
    docs = httpx.get(server.base_url + "/docs", timeout=30)
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_responses_match_their_documented_models(server) -> None:  # noqa: ANN001
    completion = post(server, "/v1/completions", {"prompt": PROMPT, "max_tokens": 4})
    CompletionResponse.model_validate(completion.json())
    chat = post(server, "/v1/chat/completions", {"messages": CHAT, "max_tokens": 4})
    message = ChatCompletionResponse.model_validate(chat.json()).choices[0].message
    assert "refusal" in chat.json()["choices"][0]["message"] and message.refusal is None
    ModelList.model_validate(httpx.get(server.base_url + "/v1/models", timeout=30).json())
    error = post(server, "/v1/completions", {"prompt": PROMPT, "n": 2})
    assert error.status_code == 400
    ErrorResponse.model_validate(error.json())


def test_models_retrieve(server) -> None:  # noqa: ANN001
    model = client(server).models.retrieve("tiny")
    assert (model.id, model.object) == ("tiny", "model")
    ModelCard.model_validate(model.model_dump())
    with pytest.raises(openai.NotFoundError) as info:
        client(server).models.retrieve("gpt-9")
    assert info.value.body["code"] == "model_not_found"


def test_a_wrong_method_is_405_with_allow(server) -> None:  # noqa: ANN001
    response = httpx.get(server.base_url + "/v1/completions", timeout=30)
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert response.json()["error"]["code"] == "http_405"


@pytest.mark.parametrize("method", ["TRACE", "PUT", "GET"])
def test_a_wrong_method_with_a_body_is_answered_and_closed_cleanly(server, method) -> None:  # noqa: ANN001
    """The 405's body is read first: closing on unread bytes would reset the connection."""
    body = json.dumps({"messages": [{"role": "user", "content": "x" * 200_000}]}).encode()
    port = int(server.base_url.rsplit(":", 1)[1])
    head = (
        f"{method} /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode() + body)
        received = b""
        while chunk := sock.recv(65536):  # to the server's close; a reset raises here
            received += chunk
    status_line, _, rest = received.partition(b"\r\n")
    assert status_line == b"HTTP/1.1 405 Method Not Allowed"
    assert json.loads(rest.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "http_405"


def test_unknown_fields_are_served_and_named_in_a_header_and_the_log(server) -> None:  # noqa: ANN001
    body = {"prompt": PROMPT, "max_tokens": 2, "colour": "red", "skip_special_tokens": True}
    response = post(server, "/v1/completions", body)
    assert response.status_code == 200, response.text
    assert response.headers[IGNORED_HEADER] == '"colour", "skip_special_tokens"'
    assert server.wait_until(
        lambda: 'ignored unknown fields: "colour", "skip_special_tokens"' in server.log_tail(200),
        10,
    )
    plain = post(server, "/v1/completions", {"prompt": PROMPT, "max_tokens": 2})
    assert IGNORED_HEADER not in plain.headers


def test_guidellm_stream_options_give_usage_on_every_chunk(server) -> None:  # noqa: ANN001
    options = {"include_usage": True, "continuous_usage_stats": True, "include_obfuscation": False}
    body = {"prompt": PROMPT, "max_tokens": 12, "ignore_eos": True, "stream": True}
    events = sse_events(server, "/v1/completions", {**body, "stream_options": options})
    *chunks, last = events
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 12
    counts = [c["usage"]["completion_tokens"] for c in chunks]
    assert all("usage" in c for c in chunks) and counts == sorted(counts) and counts[-1] == 12
    assert all(c["usage"]["prompt_tokens"] == len(PROMPT) for c in chunks)


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_no_empty_first_chunk(server, path: str) -> None:  # noqa: ANN001
    body = {"max_tokens": 6, "ignore_eos": True, "temperature": 0, "stream": True}
    body |= {"prompt": PROMPT} if path == "/v1/completions" else {"messages": CHAT}
    first = sse_events(server, path, body)[0]["choices"][0]
    if path == "/v1/completions":
        assert first["text"]
    else:
        assert first["delta"]["role"] == "assistant" and first["delta"]["content"]


def test_lm_eval_token_prompts(server) -> None:  # noqa: ANN001
    ids = [ord(c) - 30 for c in "def f(x):"]  # any ids of the character vocabulary
    texts = [
        post(server, "/v1/completions", {"prompt": p, "max_tokens": 3, "temperature": 0}).json()
        for p in (ids, [ids])
    ]
    assert texts[0]["choices"][0]["text"] == texts[1]["choices"][0]["text"]
    batch = post(server, "/v1/completions", {"prompt": [ids, ids], "max_tokens": 3})
    assert batch.status_code == 400 and "one prompt per request" in batch.json()["error"]["message"]


@pytest.fixture(scope="module")
def strict_app(checkpoint: tuple[Path, Path]) -> Iterator[TestClient]:
    """An in-process app with --strict-requests, loaded and serving."""
    target, drafter = checkpoint
    state = ServerState(ServeConfig(target=target, drafter=drafter, strict_requests=True))
    state.load()
    state.mark_serving()
    try:
        with TestClient(create_app(state)) as http:
            yield http
    finally:
        state.close()


def test_strict_requests_reject_unknown_fields(strict_app: TestClient) -> None:
    response = strict_app.post("/v1/completions", json={"prompt": PROMPT, "colour": "red"})
    assert response.status_code == 400
    assert response.json()["error"] | {"message": ""} == {
        "message": "",
        "type": "invalid_request_error",
        "param": "colour",
        "code": "unknown_field",
    }
    known = {"prompt": PROMPT, "max_tokens": 2, "top_k": -1, "repetition_penalty": 1.0}
    assert strict_app.post("/v1/completions", json=known).status_code == 200


def test_any_unknown_key_makes_a_valid_header(server) -> None:  # noqa: ANN001
    """Schemathesis found this one: a key with non-Latin-1 or control characters was a 500."""
    keys = {"\U0005866e\n": 1, "": 2, **{f"k{i}": i for i in range(30)}}
    body = {"prompt": PROMPT, "max_tokens": 1, **keys}
    response = post(server, "/v1/completions", body)
    assert response.status_code == 200, response.text
    names = response.headers[IGNORED_HEADER]
    assert names.startswith('"\\ud921\\ude6e\\n", "", "k0", "k1"')
    assert names.endswith(", ... (12 more)")


def test_405_names_every_method_of_the_path(server) -> None:  # noqa: ANN001
    response = httpx.request("OPTIONS", server.base_url + "/v1/ddtree/config", timeout=30)
    assert response.status_code == 405 and response.headers["allow"] == "GET, POST"
