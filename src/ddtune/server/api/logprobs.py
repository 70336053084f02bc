"""Logprobs in the two OpenAI shapes, from the engine's `TokenLogprob`s.

See docs/server.md "Server" (logprobs). Completions (legacy shape):

    {"tokens": [...], "token_logprobs": [...], "top_logprobs": [{text: logprob}, ...],
     "text_offset": [...]}

with, under `echo`, the prompt's tokens first (the very first has no
logprob: `null`, `null`); each `top_logprobs` entry holds the N most likely
tokens plus the chosen one (as vLLM does). Chat:

    {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
     "bytes"}, ...]}, ...]}

Token text is the token decoded alone; `text_offset` counts characters of the
returned text (which starts with the prompt under `echo`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the engine (and torch) load with the model, not with the app
    from ddtune.ddtree.logprobs import TokenLogprob

Decode = Callable[[list[int]], str]


def completion_logprobs(
    entries: Sequence[TokenLogprob | int], decode: Decode, offset: int = 0
) -> dict[str, Any]:
    """The legacy shape; an int entry is a token without a logprob (the prompt's first)."""
    tokens: list[str] = []
    values: list[float | None] = []
    tops: list[dict[str, float] | None] = []
    offsets: list[int] = []
    for entry in entries:
        token = entry if isinstance(entry, int) else entry.token
        text = decode([token])
        offsets.append(offset)
        offset += len(text)
        tokens.append(text)
        if isinstance(entry, int):
            values.append(None)
            tops.append(None)
            continue
        values.append(entry.logprob)
        top = {decode([t]): value for t, value in entry.top}
        tops.append({**top, text: entry.logprob} if text not in top else top)
    return {
        "tokens": tokens,
        "token_logprobs": values,
        "top_logprobs": tops,
        "text_offset": offsets,
    }


def chat_logprobs(entries: Sequence[TokenLogprob], decode: Decode) -> dict[str, Any]:
    """The chat shape: one item per generated token with its N alternatives."""
    return {
        "content": [
            {
                **_chat_token(entry.token, entry.logprob, decode),
                "top_logprobs": [_chat_token(t, value, decode) for t, value in entry.top],
            }
            for entry in entries
        ]
    }


def _chat_token(token: int, logprob: float, decode: Decode) -> dict[str, Any]:
    text = decode([token])
    return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}
