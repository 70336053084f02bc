"""Request validation: every bad field is a 400 (or 404) that names the field."""

from __future__ import annotations

import pytest

from ddtune.params import SamplingParams
from ddtune.server.errors import ApiError
from ddtune.server.requests import ConfigBody, PromptContext, parse_body, parse_generation

CTX = PromptContext(
    model_name="tiny",
    max_context=64,
    encode=lambda text: [ord(c) % 50 for c in text],  # one id per character
    render_chat=lambda msgs: "".join(f"{m['role']}:{m['content']}|" for m in msgs),
    vocab_size=50,
)


def test_completion_defaults_and_values() -> None:
    req = parse_generation("completion", {"model": "tiny", "prompt": "abc"}, CTX)
    assert req.prompt_ids == [ord(c) % 50 for c in "abc"]
    assert req.sampling == SamplingParams(max_new_tokens=16, temperature=1.0, top_p=1.0)
    assert (req.stream, req.include_usage) == (False, False)
    req = parse_generation(
        "completion",
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
            "presence_penalty": 0,
            "logprobs": None,
            "best_of": 1,
            "echo": False,
        },
        CTX,
    )
    assert req.sampling == SamplingParams(
        max_new_tokens=5, temperature=0.0, top_p=0.5, seed=7, stop_strings=("x",), ignore_eos=True
    )
    assert (req.stream, req.include_usage) == (True, True)


def test_token_id_prompt_and_chat_rendering() -> None:
    assert parse_generation("completion", {"prompt": [1, 2, 3]}, CTX).prompt_ids == [1, 2, 3]
    parts = [{"type": "text", "text": "h"}, {"type": "text", "text": "i"}]
    req = parse_generation("chat", {"messages": [{"role": "user", "content": parts}]}, CTX)
    assert req.prompt_ids == CTX.encode("user:hi|")
    assert req.sampling.max_new_tokens == 64 - len("user:hi|")  # default: the rest of the context
    body = {"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 3}
    assert parse_generation("chat", body, CTX).sampling.max_new_tokens == 3


C0 = "messages[0].content"
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
    ("completion", {"prompt": ["a", "b"]}, 400, "prompt"),
    ("completion", {"prompt": [1, True]}, 400, "prompt"),
    ("completion", {"prompt": "a", "n": 1.0}, 400, "n"),
    ("completion", {"prompt": "a", "logprobs": 2}, 400, "logprobs"),
    ("completion", {"prompt": "a", "stop": ["x"] * 17}, 400, "stop"),
    ("completion", {"prompt": "a", "top_p": 1.5}, 400, "top_p"),
    ("completion", {"prompt": "a", "seed": -1}, 400, "seed"),
    (
        "completion",
        {"prompt": "a", "stream": True, "stream_options": {"include_usage": 1}},
        400,
        "stream_options.include_usage",
    ),
    ("chat", {"messages": "hi"}, 400, "messages"),
    ("chat", {"messages": []}, 400, "messages"),
    ("chat", {"messages": [{"role": "wizard", "content": "x"}]}, 400, "messages[0].role"),
    ("chat", {"messages": [{"role": "user", "content": 3}]}, 400, "messages[0].content"),
    ("chat", {"messages": [{"role": "user", "content": "x"}], "prompt": "a"}, 400, "prompt"),
    ("chat", {"messages": [5]}, 400, "messages[0]"),
    ("chat", {"messages": [{"role": "user", "content": [{"type": "image"}]}]}, 400, C0),
    ("chat", {"messages": [{"role": "user", "content": "x"}], "echo": False}, 400, "echo"),
    (
        "chat",
        {"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2},
        400,
        "top_logprobs",
    ),
]


@pytest.mark.parametrize(("kind", "body", "status", "param"), BAD)
def test_bad_fields_are_named(kind: str, body: object, status: int, param: str | None) -> None:
    with pytest.raises(ApiError) as info:
        parse_generation(kind, body, CTX)
    error = info.value.body()["error"]
    assert info.value.status == status
    assert error["param"] == param
    assert error["message"] and error["type"]
    if param is not None:
        assert param in error["message"] or param.split(".")[-1] in error["message"]


def test_error_codes_say_what_kind_of_problem() -> None:
    def code(body: object) -> str:
        with pytest.raises(ApiError) as info:
            parse_generation("completion", body, CTX)
        return info.value.body()["error"]["code"]

    assert code({"prompt": "a", "colour": 1}) == "unknown_field"
    assert code({}) == "missing_field"
    assert code({"prompt": "a", "presence_penalty": 0.5}) == "unsupported_value"
    assert code({"prompt": "a", "temperature": -1}) == "invalid_value"
    assert code({"prompt": "a" * 64}) == "context_length_exceeded"
    assert code([1]) == "invalid_json"


def test_an_unknown_field_is_reported_before_other_problems() -> None:
    with pytest.raises(ApiError) as info:
        parse_generation("completion", {"prompt": 5, "temperature": "x", "zeta": 1}, CTX)
    assert info.value.param == "zeta"


def test_null_means_not_given() -> None:
    body = {"prompt": "a", "max_tokens": None, "temperature": None, "stop": None, "n": None}
    req = parse_generation("completion", body, CTX)
    assert req.sampling == SamplingParams(max_new_tokens=16, temperature=1.0)


def test_config_body_keeps_the_given_keys_in_wire_form() -> None:
    assert parse_body(ConfigBody, {"window": None, "budget": 3}).updates() == {
        "window": None,
        "budget": 3,
    }
    assert parse_body(ConfigBody, {"window": "none"}).updates() == {"window": "none"}
    for body, param in [({}, None), ({"mode": "fast"}, "mode"), ({"window": 1.5}, "window")]:
        with pytest.raises(ApiError) as info:
            parse_body(ConfigBody, body)
        assert (info.value.status, info.value.param) == (400, param)
