"""Parse and validate OpenAI request bodies into one `GenerationRequest`.

Strict on purpose: a wrong type, an out-of-range value or an unknown field is
a 400 whose `param` names the field. Fields we accept but cannot honour
(penalties, logprobs, echo, ...) pass only with their neutral value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ddtune.server.errors import ApiError, invalid

MAX_STOP_STRINGS = 16

COMMON_FIELDS = {
    "model",
    "max_tokens",
    "temperature",
    "top_p",
    "seed",
    "stop",
    "n",
    "stream",
    "stream_options",
    "ignore_eos",
    "user",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "best_of",
}
COMPLETION_FIELDS = COMMON_FIELDS | {"prompt", "echo", "suffix"}
CHAT_FIELDS = COMMON_FIELDS | {"messages", "max_completion_tokens", "top_logprobs"}
NEUTRAL_VALUES: dict[str, tuple[Any, ...]] = {
    "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0),
    "logit_bias": (None, {}),
    "logprobs": (None, False, 0),
    "top_logprobs": (None, 0),
    "best_of": (None, 1),
    "echo": (None, False),
    "suffix": (None, ""),
}


@dataclass(frozen=True)
class PromptContext:
    """What validation needs to know about the loaded model."""

    model_name: str
    max_context: int
    encode: Callable[[str], list[int]]
    render_chat: Callable[[list[dict[str, str]]], str]
    vocab_size: int | None = None


@dataclass(frozen=True)
class GenerationRequest:
    kind: str  # "completion" | "chat"
    prompt_ids: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    stop: tuple[str, ...]
    ignore_eos: bool
    stream: bool
    include_usage: bool


def parse_completion(body: Any, ctx: PromptContext) -> GenerationRequest:
    body = _require_object(body)
    _check_fields(body, COMPLETION_FIELDS)
    prompt_ids = _prompt_ids(body.get("prompt"), ctx)
    return _build("completion", body, prompt_ids, ctx, default_max_tokens=16)


def parse_chat(body: Any, ctx: PromptContext) -> GenerationRequest:
    body = _require_object(body)
    _check_fields(body, CHAT_FIELDS)
    messages = _messages(body.get("messages"))
    try:
        text = ctx.render_chat(messages)
    except Exception as exc:  # the template itself rejects these messages
        raise invalid("messages", f"the chat template rejected the messages: {exc}") from None
    prompt_ids = ctx.encode(text)
    if "max_completion_tokens" in body and body.get("max_tokens") is None:
        body = {**body, "max_tokens": body["max_completion_tokens"]}
    return _build("chat", body, prompt_ids, ctx, default_max_tokens=None)


def _build(
    kind: str, body: dict, prompt_ids: list[int], ctx: PromptContext, default_max_tokens: int | None
) -> GenerationRequest:
    _check_model(body.get("model"), ctx.model_name)
    prompt_param = "prompt" if kind == "completion" else "messages"
    room = ctx.max_context - len(prompt_ids)
    if room < 1:
        raise invalid(
            prompt_param,
            f"the prompt has {len(prompt_ids)} tokens but the model's context is "
            f"{ctx.max_context}; shorten it",
            code="context_length_exceeded",
        )
    max_tokens = _int(body, "max_tokens", default_max_tokens or room, 1, ctx.max_context)
    if max_tokens > room:
        raise invalid(
            "max_tokens",
            f"prompt ({len(prompt_ids)} tokens) + max_tokens ({max_tokens}) exceeds the "
            f"model's context of {ctx.max_context}; lower max_tokens to at most {room}",
            code="context_length_exceeded",
        )
    if _int(body, "n", 1, 1, 1 << 20) != 1:
        raise invalid("n", "only n=1 is supported", code="unsupported_value")
    stream = _bool(body, "stream", False)
    return GenerationRequest(
        kind=kind,
        prompt_ids=prompt_ids,
        max_tokens=max_tokens,
        temperature=_number(body, "temperature", 1.0, 0.0, 100.0),
        top_p=_top_p(body),
        seed=_int(body, "seed", None, 0, (1 << 63) - 1),
        stop=_stop(body.get("stop")),
        ignore_eos=_bool(body, "ignore_eos", False),
        stream=stream,
        include_usage=_include_usage(body.get("stream_options"), stream),
    )


def _require_object(body: Any) -> dict:
    if not isinstance(body, dict):
        raise invalid(None, "the request body must be a JSON object", code="invalid_json")
    return body


def _check_fields(body: dict, allowed: set[str]) -> None:
    for key in sorted(body):
        if key not in allowed:
            raise invalid(key, f"unknown field {key!r}", code="unknown_field")
    for key, neutral in NEUTRAL_VALUES.items():
        if key in body and not any(_same(body[key], v) for v in neutral):
            raise invalid(key, f"{key} is not supported by this server", code="unsupported_value")


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b if b is not None else a is None


def _check_model(model: Any, served: str) -> None:
    if model is None:
        return
    if not isinstance(model, str):
        raise invalid("model", f"model must be a string; got {type(model).__name__}")
    if model != served:
        raise ApiError(
            404,
            f"model {model!r} does not exist; this server serves {served!r} (see /v1/models)",
            param="model",
            code="model_not_found",
        )


def _prompt_ids(prompt: Any, ctx: PromptContext) -> list[int]:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        ids = ctx.encode(prompt)
    elif isinstance(prompt, list) and prompt and all(_is_int(t) for t in prompt):
        ids = list(prompt)
        limit = ctx.vocab_size
        if any(t < 0 or (limit is not None and t >= limit) for t in ids):
            raise invalid("prompt", f"token ids must lie in [0, {limit}) for this model")
    elif prompt is None:
        raise invalid("prompt", "prompt is required", code="missing_field")
    else:
        raise invalid(
            "prompt", "prompt must be a string, a list with one string, or a list of token ids"
        )
    if not ids:
        raise invalid("prompt", "the prompt is empty after tokenization")
    return ids


def _messages(messages: Any) -> list[dict[str, str]]:
    if messages is None:
        raise invalid("messages", "messages is required", code="missing_field")
    if not isinstance(messages, list) or not messages:
        raise invalid("messages", "messages must be a non-empty list of {role, content} objects")
    out = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise invalid(where, f"{where} must be an object with role and content")
        role = message.get("role")
        if role not in ("system", "user", "assistant", "developer"):
            raise invalid(f"{where}.role", f"{where}.role must be system, user or assistant")
        out.append({"role": role, "content": _content(message.get("content"), where)})
    return out


def _content(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text"):
                raise invalid(f"{where}.content", "only text content parts are supported")
            if not isinstance(part.get("text"), str):
                raise invalid(f"{where}.content", "a text content part needs a string 'text'")
            parts.append(part["text"])
        return "".join(parts)
    raise invalid(f"{where}.content", f"{where}.content must be a string or a list of text parts")


def _stop(stop: Any) -> tuple[str, ...]:
    if stop is None:
        return ()
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise invalid("stop", "stop must be a non-empty string or a list of non-empty strings")
    if len(stop) > MAX_STOP_STRINGS:
        raise invalid("stop", f"at most {MAX_STOP_STRINGS} stop strings are supported")
    return tuple(stop)


def _include_usage(options: Any, stream: bool) -> bool:
    if options is None:
        return False
    if not isinstance(options, dict) or set(options) - {"include_usage"}:
        raise invalid("stream_options", "stream_options may only contain include_usage")
    if not stream:
        raise invalid("stream_options", "stream_options is only allowed with stream=true")
    value = options.get("include_usage", False)
    if not isinstance(value, bool):
        raise invalid("stream_options.include_usage", "include_usage must be a boolean")
    return value


def _top_p(body: dict) -> float:
    top_p = _number(body, "top_p", 1.0, 0.0, 1.0)
    if top_p <= 0.0:
        raise invalid("top_p", "top_p must be greater than 0 and at most 1")
    return top_p


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(body: dict, name: str, default: int | None, low: int, high: int) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if not _is_int(value):
        raise invalid(name, f"{name} must be an integer; got {type(value).__name__}")
    if not low <= value <= high:
        raise invalid(name, f"{name} must be between {low} and {high}; got {value}")
    return value


def _number(body: dict, name: str, default: float, low: float, high: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid(name, f"{name} must be a number; got {type(value).__name__}")
    if not low <= value <= high:
        raise invalid(name, f"{name} must be between {low} and {high}; got {value}")
    return float(value)


def _bool(body: dict, name: str, default: bool) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(name, f"{name} must be a boolean; got {type(value).__name__}")
    return value
