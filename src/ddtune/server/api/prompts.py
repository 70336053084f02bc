"""What a prompt must satisfy against the loaded model, and how it becomes token ids.

See docs/server.md "Server" (limits, request policy). `PromptContext` is
the loaded model as request validation sees it: its name, context length,
tokenizer, chat template and vocabulary. Text is measured before it is
tokenized: a text longer than `max_context` × the longest token cannot fit
whatever it tokenizes to, so it never reaches the tokenizer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ddtune.server.api.errors import ApiError, invalid

RenderChat = Callable[[list[dict[str, str]], Mapping[str, Any]], str]


@dataclass(frozen=True)
class PromptContext:
    """What validation needs to know about the loaded model."""

    model_name: str
    max_context: int
    encode: Callable[[str], list[int]]
    render_chat: RenderChat  # (messages, extra template variables) -> text
    vocab_size: int | None = None
    max_token_chars: int | None = None  # the most characters one token can stand for
    strict: bool = False  # --strict-requests: unknown fields are a 400

    def text_ids(self, field: str, text: str) -> list[int]:
        """Tokenize `text` after checking that it can fit the context at all."""
        self.check_length(field, len(text))
        ids = self.encode(text)
        if not ids:
            raise invalid(field, f"{field} is empty after tokenization")
        return ids

    def token_ids(self, field: str, ids: Sequence[int]) -> list[int]:
        """Token ids given by the client: within the context and the vocabulary."""
        if len(ids) >= self.max_context:
            raise self.too_long(field, len(ids))
        self.check_vocab(field, ids)
        return [int(t) for t in ids]

    def check_vocab(self, field: str, ids: Sequence[int]) -> None:
        limit = self.vocab_size
        if any(t < 0 or (limit is not None and t >= limit) for t in ids):
            raise invalid(field, f"{field} token ids must lie in [0, {limit}) for this model")

    def check_length(self, field: str, chars: int) -> None:
        """Reject text that cannot fit the context, before spending time tokenizing it."""
        if self.max_token_chars is None:
            return
        most = self.max_context * self.max_token_chars
        if chars > most:
            raise invalid(
                field,
                f"the prompt has {chars} characters; the model's context of {self.max_context} "
                f"tokens holds at most {most} characters of text; shorten it",
                code="context_length_exceeded",
            )

    def too_long(self, field: str, tokens: int) -> ApiError:
        return invalid(
            field,
            f"the prompt has {tokens} tokens but the model's context is {self.max_context}; "
            "shorten it",
            code="context_length_exceeded",
        )

    def chat_ids(self, messages: list[dict[str, str]], variables: Mapping[str, Any]) -> list[int]:
        """Render the chat template (extra `variables` from `chat_template_kwargs`), tokenize."""
        self.check_length("messages", sum(len(m["content"]) for m in messages))
        try:
            text = self.render_chat(messages, variables)
        except Exception as exc:  # the template itself rejects these messages
            raise invalid("messages", f"the chat template rejected the messages: {exc}") from None
        return self.text_ids("messages", text)

    def check_model(self, model: str | None) -> None:
        check_model(model, self.model_name)


def check_model(model: str | None, served: str) -> None:
    """A 404 unless `model` is None or the served model's id."""
    if model is not None and model != served:
        shown = repr(model) if len(model) <= 80 else repr(model[:77] + "...")
        raise ApiError(
            404,
            f"model {shown} does not exist; this server serves {served!r} (see /v1/models)",
            param="model",
            code="model_not_found",
        )
