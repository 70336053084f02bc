"""Request validation: every bad field is a 400 (or 404) that names the field."""

from __future__ import annotations

import pytest

from ddtune.server.errors import ApiError
from ddtune.server.requests import PromptContext, parse_chat, parse_completion

CTX = PromptContext(
    model_name="tiny",
    max_context=64,
    encode=lambda text: [ord(c) % 50 for c in text],  # one id per character
    render_chat=lambda msgs: "".join(f"{m['role']}:{m['content']}|" for m in msgs),
    vocab_size=50,
)


def test_completion_defaults_and_values() -> None:
    req = parse_completion({"model": "tiny", "prompt": "abc"}, CTX)
    assert req.prompt_ids == [ord(c) % 50 for c in "abc"]
    assert (req.max_tokens, req.temperature, req.top_p, req.seed) == (16, 1.0, 1.0, None)
    assert (req.stop, req.stream, req.include_usage, req.ignore_eos) == ((), False, False, False)
    req = parse_completion(
        {
            "prompt": ["abc"],
            "max_tokens": 5,
            "temperature": 0,
            "top_p": 0.5,
            "seed": 7,
            "stop": "x",
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
            "n": 1,
        },
        CTX,
    )
    assert (req.max_tokens, req.temperature, req.top_p, req.seed) == (5, 0.0, 0.5, 7)
    assert (req.stop, req.stream, req.include_usage, req.ignore_eos) == (("x",), True, True, True)


def test_token_id_prompt_and_chat_rendering() -> None:
    assert parse_completion({"prompt": [1, 2, 3]}, CTX).prompt_ids == [1, 2, 3]
    req = parse_chat(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}, CTX
    )
    assert req.prompt_ids == CTX.encode("user:hi|")
    assert req.max_tokens == 64 - len("user:hi|")  # chat default: the rest of the context


BAD = [
    # (parser, body, status, param)
    ("completion", [1], 400, None),
    ("completion", {"model": "other", "prompt": "a"}, 404, "model"),
    ("completion", {"prompt": "a", "max_tokens": -1}, 400, "max_tokens"),
    ("completion", {"prompt": "a", "max_tokens": 0}, 400, "max_tokens"),
    ("completion", {"prompt": "a", "max_tokens": 10**9}, 400, "max_tokens"),
    ("completion", {"prompt": "a" * 60, "max_tokens": 10}, 400, "max_tokens"),
    ("completion", {"prompt": "a" * 64}, 400, "prompt"),
    ("completion", {"prompt": "a", "temperature": -0.1}, 400, "temperature"),
    ("completion", {"prompt": "a", "temperature": "0"}, 400, "temperature"),
    ("completion", {"prompt": "a", "max_tokens": 1.5}, 400, "max_tokens"),
    ("completion", {"prompt": "a", "max_tokens": True}, 400, "max_tokens"),
    ("completion", {"prompt": "a", "top_p": 0}, 400, "top_p"),
    ("completion", {"prompt": "a", "n": 2}, 400, "n"),
    ("completion", {"prompt": "a", "stop": 3}, 400, "stop"),
    ("completion", {"prompt": "a", "stop": [""]}, 400, "stop"),
    ("completion", {"prompt": "a", "stream": "yes"}, 400, "stream"),
    (
        "completion",
        {"prompt": "a", "stream_options": {"include_usage": True}},
        400,
        "stream_options",
    ),
    ("completion", {"prompt": "a", "seed": "1"}, 400, "seed"),
    ("completion", {"prompt": "a", "frobnicate": 1}, 400, "frobnicate"),
    ("completion", {"prompt": "a", "presence_penalty": 0.5}, 400, "presence_penalty"),
    ("completion", {"prompt": 5}, 400, "prompt"),
    ("completion", {"prompt": [1, 99]}, 400, "prompt"),
    ("completion", {"prompt": ""}, 400, "prompt"),
    ("completion", {}, 400, "prompt"),
    ("chat", {"messages": "hi"}, 400, "messages"),
    ("chat", {"messages": []}, 400, "messages"),
    ("chat", {"messages": [{"role": "wizard", "content": "x"}]}, 400, "messages[0].role"),
    ("chat", {"messages": [{"role": "user", "content": 3}]}, 400, "messages[0].content"),
    ("chat", {"messages": [{"role": "user", "content": "x"}], "prompt": "a"}, 400, "prompt"),
]


@pytest.mark.parametrize(("kind", "body", "status", "param"), BAD)
def test_bad_fields_are_named(kind: str, body: object, status: int, param: str | None) -> None:
    parse = parse_completion if kind == "completion" else parse_chat
    with pytest.raises(ApiError) as info:
        parse(body, CTX)
    error = info.value.body()["error"]
    assert info.value.status == status
    assert error["param"] == param
    assert error["message"] and error["type"]
