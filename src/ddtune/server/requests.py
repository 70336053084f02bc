"""The server's request bodies as pydantic models, and their resolution into work.

See docs/architecture.md "Server". One model per endpoint, each field listed once:

    CompletionBody   POST /v1/completions        (GenerationFields + prompt, echo, suffix)
    ChatBody         POST /v1/chat/completions   (GenerationFields + messages, ...)
    ConfigBody       POST /v1/ddtree/config      (any of mode, budget, topk, window)

Strict on purpose: a wrong type, an out-of-range value or an unknown field is
a 400 whose `param` is the field's location (`errors.from_validation`). A JSON
`null` means "not given". Fields we accept but cannot honour (penalties,
logprobs, echo, ...) pass only with their neutral value (`only(...)`).

`parse_body` validates a decoded JSON body; `GenerationFields.resolve` then
checks what needs the loaded model (model name, context length, token ids)
and yields one `GenerationRequest` carrying a `SamplingParams`.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, TypeGuard, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    WrapValidator,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ddtune.params import Mode, SamplingParams
from ddtune.server.errors import ApiError, from_validation, invalid
from ddtune.tables import StrictModel

MAX_STOP_STRINGS = 16
MAX_STOP_CHARS = 1024  # held-back text is matched against every prefix of every stop string
MAX_SEED = (1 << 63) - 1
B = TypeVar("B", bound=BaseModel)


def must_be(description: str) -> WrapValidator:
    """Replace a union's per-member errors with one message saying what is allowed."""

    def check(value: Any, handler: Callable[[Any], Any]) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise PydanticCustomError(
                "invalid_value", "must be {what}", {"what": description}
            ) from None

    return WrapValidator(check)


def only(*neutral: Any) -> WrapValidator:
    """A field we cannot honour: accepted only with one of its `neutral` values."""
    allowed = " or ".join(repr(v) for v in neutral)

    def check(value: Any, handler: Callable[[Any], Any]) -> Any:
        try:
            value = handler(value)
        except ValidationError:
            value = object()  # any other type is no neutral value either
        if not any(type(value) is type(v) and value == v for v in neutral):
            raise PydanticCustomError(
                "unsupported_value",
                "only {allowed} is supported by this server",
                {"allowed": allowed},
            )
        return value

    return WrapValidator(check)


StopText = Annotated[str, Field(min_length=1, max_length=MAX_STOP_CHARS)]
Stop = Annotated[
    StopText | Annotated[list[StopText], Field(max_length=MAX_STOP_STRINGS)],
    must_be(
        f"a string or a list of at most {MAX_STOP_STRINGS} strings, each of 1 to "
        f"{MAX_STOP_CHARS} characters"
    ),
]
Prompt = Annotated[
    str
    | Annotated[list[str], Field(min_length=1, max_length=1)]
    | Annotated[list[int], Field(min_length=1)],
    must_be("a string, a list with one string, or a non-empty list of token ids"),
]


class StreamOptions(StrictModel):
    include_usage: bool = False


class TextPart(StrictModel):
    model_config = ConfigDict(extra="ignore")  # as before: other keys of a part are ignored

    type: Literal["text"]
    text: str


class ChatMessage(StrictModel):
    model_config = ConfigDict(extra="ignore")  # as before: name etc. are ignored

    role: Literal["system", "user", "assistant", "developer"]
    content: Annotated[str | list[TextPart], must_be("a string or a list of text parts")]

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


@dataclass(frozen=True)
class PromptContext:
    """What validation needs to know about the loaded model."""

    model_name: str
    max_context: int
    encode: Callable[[str], list[int]]
    render_chat: Callable[[list[dict[str, str]]], str]
    vocab_size: int | None = None
    max_token_chars: int | None = None  # the most characters one token can stand for

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

    def check_ids(self, field: str, count: int) -> None:
        if count >= self.max_context:
            raise invalid(
                field,
                f"the prompt has {count} tokens but the model's context is {self.max_context}; "
                "shorten it",
                code="context_length_exceeded",
            )


@dataclass(frozen=True)
class GenerationRequest:
    kind: str  # "completion" | "chat"
    prompt_ids: list[int]
    sampling: SamplingParams
    stream: bool
    include_usage: bool


class GenerationFields(StrictModel):
    """The fields both generation endpoints take (OpenAI names; `ignore_eos` as in vLLM)."""

    KIND: ClassVar[str]
    PROMPT_FIELD: ClassVar[str]
    DEFAULT_MAX_TOKENS: ClassVar[int | None]  # None: the rest of the context

    model: str | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0.0, le=100.0)] = 1.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)] | None = None
    stop: Stop | None = None
    n: Annotated[int, only(1)] = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False
    user: str | None = None
    presence_penalty: Annotated[float, only(0.0)] = 0.0
    frequency_penalty: Annotated[float, only(0.0)] = 0.0
    logit_bias: Annotated[dict[str, float], only({})] = Field(default_factory=dict)
    logprobs: Annotated[bool | int, only(False, 0)] = False
    best_of: Annotated[int, only(1)] = 1

    @model_validator(mode="before")
    @classmethod
    def _null_is_not_given(cls, data: Any) -> Any:
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data

    @field_validator("stream_options")
    @classmethod
    def _only_when_streaming(cls, value: StreamOptions, info: ValidationInfo) -> StreamOptions:
        if not info.data.get("stream"):
            raise PydanticCustomError("invalid_value", "only allowed with stream=true")
        return value

    @abstractmethod
    def prompt_ids(self, ctx: PromptContext) -> list[int]:
        """The prompt as token ids (an `ApiError` if the model cannot take it)."""

    def requested_max_tokens(self) -> int | None:
        return self.max_tokens

    def resolve(self, ctx: PromptContext) -> GenerationRequest:
        """The checks that need the loaded model, then the work to queue."""
        check_model(self.model, ctx.model_name)
        prompt_ids = self.prompt_ids(ctx)
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        sampling = SamplingParams(
            max_new_tokens=self._max_tokens(len(prompt_ids), ctx.max_context),
            temperature=self.temperature,
            top_p=self.top_p,
            seed=self.seed,
            stop_strings=stop,
            ignore_eos=self.ignore_eos,
        )
        include_usage = self.stream_options is not None and self.stream_options.include_usage
        return GenerationRequest(self.KIND, prompt_ids, sampling, self.stream, include_usage)

    def _max_tokens(self, prompt_tokens: int, max_context: int) -> int:
        room = max_context - prompt_tokens
        if room < 1:
            raise invalid(
                self.PROMPT_FIELD,
                f"the prompt has {prompt_tokens} tokens but the model's context is "
                f"{max_context}; shorten it",
                code="context_length_exceeded",
            )
        max_tokens = self.requested_max_tokens() or self.DEFAULT_MAX_TOKENS or room
        if max_tokens > room:
            raise invalid(
                "max_tokens",
                f"prompt ({prompt_tokens} tokens) + max_tokens ({max_tokens}) exceeds the "
                f"model's context of {max_context}; lower max_tokens to at most {room}",
                code="context_length_exceeded",
            )
        return max_tokens


class CompletionBody(GenerationFields):
    """POST /v1/completions."""

    KIND = "completion"
    PROMPT_FIELD = "prompt"
    DEFAULT_MAX_TOKENS = 16

    prompt: Prompt
    echo: Annotated[bool, only(False)] = False
    suffix: Annotated[str, only("")] = ""

    def prompt_ids(self, ctx: PromptContext) -> list[int]:
        text = self.prompt[0] if _is_text_list(self.prompt) else self.prompt
        if isinstance(text, str):
            ctx.check_length("prompt", len(text))
            ids = ctx.encode(text)
        else:
            ctx.check_ids("prompt", len(text))
            ids = [int(t) for t in text]
            limit = ctx.vocab_size
            if any(t < 0 or (limit is not None and t >= limit) for t in ids):
                raise invalid("prompt", f"prompt token ids must lie in [0, {limit}) for this model")
        if not ids:
            raise invalid("prompt", "prompt is empty after tokenization")
        return ids


class ChatBody(GenerationFields):
    """POST /v1/chat/completions."""

    KIND = "chat"
    PROMPT_FIELD = "messages"
    DEFAULT_MAX_TOKENS = None

    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    top_logprobs: Annotated[int, only(0)] = 0

    def prompt_ids(self, ctx: PromptContext) -> list[int]:
        messages = [{"role": m.role, "content": m.text()} for m in self.messages]
        ctx.check_length("messages", sum(len(m["content"]) for m in messages))
        try:
            text = ctx.render_chat(messages)
        except Exception as exc:  # the template itself rejects these messages
            raise invalid("messages", f"the chat template rejected the messages: {exc}") from None
        ctx.check_length("messages", len(text))
        return ctx.encode(text)

    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens if self.max_tokens is None else self.max_tokens


class ConfigBody(StrictModel):
    """POST /v1/ddtree/config: any of mode, budget, topk, window (ranges: `DecodeParams`)."""

    mode: Mode | None = None
    budget: int | None = None
    topk: int | None = None
    window: Annotated[int | str | None, must_be("a positive integer or 'none'")] = None

    @model_validator(mode="after")
    def _not_empty(self) -> ConfigBody:
        if not self.model_fields_set:
            raise PydanticCustomError(
                "invalid_value", "the body must name some of mode, budget, topk, window"
            )
        return self

    def updates(self) -> dict[str, Any]:
        """The keys given, in wire form (for `DecodeParams.with_updates`)."""
        return self.model_dump(exclude_unset=True)


BODIES: dict[str, type[GenerationFields]] = {"completion": CompletionBody, "chat": ChatBody}


def parse_body(model: type[B], body: Any) -> B:
    """Validate a decoded JSON body as `model`; any problem is a 400 naming the field."""
    if not isinstance(body, dict):
        raise invalid(None, "the request body must be a JSON object", code="invalid_json")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise from_validation(exc) from None


def parse_generation(kind: str, body: Any, ctx: PromptContext) -> GenerationRequest:
    """A completion ("completion") or chat ("chat") body, validated and resolved."""
    return parse_body(BODIES[kind], body).resolve(ctx)


def check_model(model: str | None, served: str) -> None:
    if model is not None and model != served:
        shown = repr(model) if len(model) <= 80 else repr(model[:77] + "...")
        raise ApiError(
            404,
            f"model {shown} does not exist; this server serves {served!r} (see /v1/models)",
            param="model",
            code="model_not_found",
        )


def _is_text_list(prompt: str | list[str] | list[int]) -> TypeGuard[list[str]]:
    return isinstance(prompt, list) and isinstance(prompt[0], str)
