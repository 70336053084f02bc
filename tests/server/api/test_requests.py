"""Request validation: every bad field is a 400 (or 404) that names the field; the
request policy (known fields, neutral values, unknown fields, prompt forms)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ddtune.params import SamplingParams
from ddtune.server.api.errors import ApiError
from ddtune.server.api.prompts import PromptContext
from ddtune.server.api.requests import ConfigBody, parse_body, parse_generation

CTX = PromptContext(
    model_name="tiny",
    max_context=64,
    encode=lambda text: [ord(c) % 50 for c in text],  # one id per character
    render_chat=lambda msgs, extra: (
        "".join(f"{m['role']}:{m['content']}|" for m in msgs)
        + "".join(f"{k}={v}" for k, v in extra.items())
    ),
    vocab_size=50,
)
STRICT = replace(CTX, strict=True)


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
    ("completion", {"prompt": "a", "presence_penalty": 0.5}, 400, "presence_penalty"),
    ("completion", {"prompt": 5}, 400, "prompt"),
    ("completion", {"prompt": [1, 99]}, 400, "prompt"),
    ("completion", {"prompt": ""}, 400, "prompt"),
    ("completion", {}, 400, "prompt"),
    ("completion", {"prompt": ["a", "b"]}, 400, "prompt"),
    ("completion", {"prompt": [1, True]}, 400, "prompt"),
    ("completion", {"prompt": "a", "n": 1.0}, 400, "n"),
    ("completion", {"prompt": "a", "logprobs": 21}, 400, "logprobs"),
    ("completion", {"prompt": "a", "logprobs": 2, "stream": True}, 400, "logprobs"),
    ("completion", {"prompt": "a", "echo": True, "stream": True}, 400, "echo"),
    ("completion", {"prompt": "a", "max_tokens": 3, "min_tokens": 4}, 400, "min_tokens"),
    ("completion", {"prompt": "a", "top_k": -2}, 400, "top_k"),
    ("completion", {"prompt": "a", "stop": ["x"] * 17}, 400, "stop"),
    ("completion", {"prompt": "a", "top_p": 1.5}, 400, "top_p"),
    ("completion", {"prompt": "a", "seed": -(2**63) - 1}, 400, "seed"),
    ("completion", {"prompt": "a", "seed": 2**64}, 400, "seed"),
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
    ("chat", {"messages": [5]}, 400, "messages[0]"),
    ("chat", {"messages": [{"role": "user", "content": [{"type": "image"}]}]}, 400, C0),
    ("chat", {"messages": [{"role": "user", "content": "x"}], "echo": True}, 400, "echo"),
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

    with pytest.raises(ApiError) as info:
        parse_generation("completion", {"prompt": "a", "colour": 1}, STRICT)
    assert info.value.code == "unknown_field"
    assert code({}) == "missing_field"
    assert code({"prompt": "a", "presence_penalty": 0.5}) == "unsupported_value"
    assert code({"prompt": "a", "temperature": -1}) == "invalid_value"
    assert code({"prompt": "a" * 64}) == "context_length_exceeded"
    assert code([1]) == "invalid_json"


def test_an_unknown_field_is_reported_before_other_problems() -> None:
    with pytest.raises(ApiError) as info:
        parse_generation("completion", {"prompt": 5, "temperature": "x", "zeta": 1}, STRICT)
    assert info.value.param == "zeta"


def test_null_means_not_given() -> None:
    body = {"prompt": "a", "max_tokens": None, "temperature": None, "stop": None, "n": None}
    req = parse_generation("completion", body, CTX)
    assert req.sampling == SamplingParams(max_new_tokens=16, temperature=1.0)


def test_config_body_keeps_the_given_keys_in_wire_form() -> None:
    assert parse_body(ConfigBody, {"window": None, "budget": 3})[0].updates() == {
        "window": None,
        "budget": 3,
    }
    assert parse_body(ConfigBody, {"window": "none"})[0].updates() == {"window": "none"}
    for body, param in [({}, None), ({"mode": "fast"}, "mode"), ({"window": 1.5}, "window")]:
        with pytest.raises(ApiError) as info:
            parse_body(ConfigBody, body)
        assert (info.value.status, info.value.param) == (400, param)


NEUTRAL = {
    # OpenAI fields at their neutral (or null) value, as SDKs and benchmark tools send them
    "n": 1,
    "best_of": 1,
    "presence_penalty": 0,
    "frequency_penalty": 0.0,
    "logit_bias": {},
    "logprobs": None,
    "echo": False,
    "suffix": None,
    "seed": -1,
    "user": "someone",
    "stream": True,
    "stream_options": {
        "include_usage": True,
        "continuous_usage_stats": True,
        "include_obfuscation": False,
    },
    # vLLM extensions: neutral values and the informational ones
    "top_k": -1,
    "min_p": 0.0,
    "min_tokens": 0,
    "repetition_penalty": 1.0,
    "length_penalty": 1.0,
    "response_format": {"type": "text"},
    "include_stop_str_in_output": False,
    "use_beam_search": False,
    "bad_words": [],
    "guided_json": None,
    "truncate_prompt_tokens": None,
    "priority": 0,
    "request_id": "r-1",
    "cache_salt": "s",
    "stop_token_ids": [3, 4],
    "max_completion_tokens": 7,
}
CHAT_NEUTRAL = {
    "tools": [],
    "tool_choice": "none",
    "parallel_tool_calls": True,
    "functions": None,
    "function_call": "auto",
    "audio": None,
    "modalities": ["text"],
    "prediction": None,
    "reasoning_effort": None,
    "metadata": {"team": "x"},
    "store": False,
    "service_tier": "auto",
    "prompt_cache_key": "k",
    "safety_identifier": "u",
    "top_logprobs": 0,
    "logprobs": False,
    "add_generation_prompt": True,
    "chat_template_kwargs": {"enable_thinking": False},
}


def test_known_fields_at_neutral_values_are_accepted_and_ignored() -> None:
    body = {"prompt": "ab", **NEUTRAL}
    req = parse_generation("completion", body, STRICT)  # all known: fine even when strict
    assert req.ignored_fields == ()
    assert req.sampling == SamplingParams(
        max_new_tokens=7, temperature=1.0, seed=-1, stop_token_ids=(3, 4)
    )
    assert (req.include_usage, req.continuous_usage) == (True, True)
    chat_body = {"messages": [{"role": "user", "content": "hi"}], **NEUTRAL, **CHAT_NEUTRAL}
    for key in ("best_of", "suffix", "echo"):
        chat_body.pop(key)
    req = parse_generation("chat", chat_body, STRICT)
    assert req.ignored_fields == ()
    assert req.prompt_ids == CTX.encode("user:hi|enable_thinking=False")  # template variables


UNSUPPORTED = [
    ("completion", "repetition_penalty", 1.2),
    ("completion", "min_p", 0.05),
    ("completion", "response_format", {"type": "json_object"}),
    ("completion", "guided_regex", "a+"),
    ("completion", "best_of", 3),
    ("completion", "suffix", "end"),
    ("completion", "use_beam_search", True),
    ("chat", "tools", [{"type": "function", "function": {"name": "f"}}]),
    ("chat", "tool_choice", "required"),
    ("chat", "tool_choice", {"type": "function", "function": {"name": "f"}}),
    ("chat", "reasoning_effort", "high"),
    ("chat", "audio", {"voice": "alloy", "format": "wav"}),
    ("chat", "modalities", ["text", "audio"]),
    ("chat", "chat_template", "{{ messages }}"),
    ("chat", "continue_final_message", True),
]


@pytest.mark.parametrize(("kind", "field", "value"), UNSUPPORTED)
def test_unsupported_non_neutral_values_are_a_400_naming_the_field(
    kind: str, field: str, value: object
) -> None:
    body = (
        {"prompt": "a"}
        if kind == "completion"
        else {"messages": [{"role": "user", "content": "x"}]}
    )
    with pytest.raises(ApiError) as info:
        parse_generation(kind, {**body, field: value}, CTX)
    assert (info.value.status, info.value.code, info.value.param) == (
        400,
        "unsupported_value",
        field,
    )
    assert "supported by this server" in info.value.message


def test_unknown_fields_are_reported_or_strict() -> None:
    body = {"prompt": "a", "colour": "red", "stream": True, "stream_options": {"shiny": 1}}
    req = parse_generation("completion", body, CTX)
    assert req.ignored_fields == ("colour", "stream_options.shiny")
    with pytest.raises(ApiError) as info:
        parse_generation("completion", body, STRICT)
    assert (info.value.code, info.value.param) == ("unknown_field", "colour")


@pytest.mark.parametrize("prompt", ["abc", ["abc"], [47, 48, 49], [[47, 48, 49]]])
def test_the_four_prompt_forms(prompt: object) -> None:
    assert parse_generation("completion", {"prompt": prompt}, CTX).prompt_ids == [47, 48, 49]


@pytest.mark.parametrize("prompt", [["a", "b"], [[1], [2]], [[1, 2], [3], [4]]])
def test_a_batch_is_one_prompt_per_request(prompt: object) -> None:
    with pytest.raises(ApiError) as info:
        parse_generation("completion", {"prompt": prompt}, CTX)
    assert (info.value.code, info.value.param) == ("unsupported_value", "prompt")
    assert "one prompt per request" in info.value.message


def test_stop_token_ids_must_be_in_the_vocabulary() -> None:
    with pytest.raises(ApiError) as info:
        parse_generation("completion", {"prompt": "a", "stop_token_ids": [50]}, CTX)
    assert info.value.param == "stop_token_ids"


def test_max_completion_tokens_is_bounded_like_max_tokens() -> None:
    with pytest.raises(ApiError) as info:
        parse_generation("completion", {"prompt": "a", "max_completion_tokens": 64}, CTX)
    assert (info.value.code, info.value.param) == (
        "context_length_exceeded",
        "max_completion_tokens",
    )
    body = {"prompt": "a", "max_tokens": 5, "max_completion_tokens": 9}
    assert parse_generation("completion", body, CTX).sampling.max_new_tokens == 5


def test_logprobs_echo_top_k_min_tokens_reach_the_sampling() -> None:
    body = {"prompt": "ab", "logprobs": 3, "echo": True, "max_tokens": 0, "top_k": 5}
    req = parse_generation("completion", {**body, "min_tokens": 0}, CTX)
    assert (req.echo, req.show_generated) == (True, False)
    assert req.sampling == SamplingParams(
        max_new_tokens=1, temperature=1.0, top_k=5, logprobs=3, prompt_logprobs=3
    )
    req = parse_generation("completion", {"prompt": "ab", "logprobs": 0, "min_tokens": 2}, CTX)
    assert (req.sampling.logprobs, req.sampling.prompt_logprobs) == (0, None)
    assert (req.sampling.min_tokens, req.echo, req.show_generated) == (2, False, True)
    assert parse_generation("completion", {"prompt": "a", "top_k": -1}, CTX).sampling.top_k == 0
    chat = {"messages": [{"role": "user", "content": "x"}], "logprobs": True, "top_logprobs": 4}
    assert parse_generation("chat", chat, CTX).sampling.logprobs == 4
    assert parse_generation("chat", {**chat, "top_logprobs": None}, CTX).sampling.logprobs == 0
    assert (
        parse_generation(
            "chat", {**chat, "logprobs": False, "top_logprobs": 0}, CTX
        ).sampling.logprobs
        is None
    )
