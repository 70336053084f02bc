"""The server's request bodies as pydantic models, and their resolution into work.

See docs/server.md "Server" (request policy). One model per endpoint,
each field listed once; the same models give the OpenAPI schema:

    CompletionBody   POST /v1/completions        (GenerationFields + prompt, echo, ...)
    ChatBody         POST /v1/chat/completions   (GenerationFields + messages, tools, ...)
    ConfigBody       POST /v1/ddtree/config      (any of mode, budget, topk, window)

Every field of the OpenAI and vLLM APIs that a client may send is declared,
with a policy (`fields.py`): supported, neutral-only (`Only`) or
informational. A JSON `null` means "not given". A field no model declares is
unknown: accepted and reported (`ignored_fields`), or a 400 under
`--strict-requests`. A wrong type or value is a 400 whose `param` is the
field's location (`errors.from_validation`).

`parse_generation` validates a decoded JSON body and then resolves what needs
the loaded model (model name, context, token ids) into one `GenerationRequest`.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, replace
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ddtune.params import MAX_LOGPROBS, Mode, SamplingParams
from ddtune.server.api.errors import from_validation, invalid
from ddtune.server.api.fields import Body, ChatExtras, Only, VllmFields, must_be
from ddtune.server.api.prompts import PromptContext

MAX_STOP_STRINGS = 16
MAX_STOP_CHARS = 1024  # held-back text is matched against every prefix of every stop string
SEED_RANGE = {"ge": -(1 << 63), "le": (1 << 64) - 1}  # what torch's manual_seed takes
B = TypeVar("B", bound=BaseModel)

StopText = Annotated[str, Field(min_length=1, max_length=MAX_STOP_CHARS)]
Stop = Annotated[
    StopText | Annotated[list[StopText], Field(max_length=MAX_STOP_STRINGS)],
    must_be(
        f"a string or a list of at most {MAX_STOP_STRINGS} strings, each of 1 to "
        f"{MAX_STOP_CHARS} characters"
    ),
]
TokenIds = Annotated[list[int], Field(min_length=1)]
Prompt = Annotated[
    str
    | Annotated[list[str], Field(min_length=1)]
    | TokenIds
    | Annotated[list[TokenIds], Field(min_length=1)],
    must_be("a string, a list of token ids, or a list holding one of these"),
]


class StreamOptions(Body):
    include_usage: bool = False  # a last chunk with usage
    continuous_usage_stats: bool = False  # vLLM: usage on every chunk (with include_usage)
    include_obfuscation: bool = True  # OpenAI: we never pad chunks, so this changes nothing


class TextPart(Body):
    type: Literal["text"]
    text: str


class ChatMessage(Body):
    """Other keys of a message (`name`, `refusal`, ...) are ignored. Only an assistant
    message may leave out `content` (or send null): it counts as empty."""

    role: Literal["system", "user", "assistant", "developer"]
    content: Annotated[str | list[TextPart], must_be("a string or a list of text parts")]

    @model_validator(mode="before")
    @classmethod
    def _assistant_may_be_empty(cls, data: Any) -> Any:
        if (
            isinstance(data, dict)
            and data.get("role") == "assistant"
            and data.get("content") is None
        ):
            return {**data, "content": ""}
        return data

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


@dataclass(frozen=True)
class GenerationRequest:
    kind: str  # "completion" | "chat"
    prompt_ids: list[int]
    sampling: SamplingParams
    stream: bool
    include_usage: bool
    continuous_usage: bool = False  # usage on every streamed chunk
    ignored_fields: tuple[str, ...] = ()  # unknown fields the request carried
    echo: bool = False  # the answer's text starts with the prompt's
    show_generated: bool = True  # False: max_tokens 0 with echo (one token runs, none shown)
    return_token_ids: bool = False  # the choice carries prompt_token_ids and token_ids


class GenerationFields(VllmFields):
    """The fields both generation endpoints take (OpenAI names, then vLLM's extensions)."""

    KIND: ClassVar[str]
    PROMPT_FIELD: ClassVar[str]
    DEFAULT_MAX_TOKENS: ClassVar[int | None]  # None: the rest of the context

    model: str | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0.0, le=100.0)] = 1.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    seed: Annotated[int, Field(**SEED_RANGE)] | None = None
    stop: Stop | None = None
    n: Annotated[int, Only(1)] = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    presence_penalty: Annotated[float, Only(0.0)] = 0.0
    frequency_penalty: Annotated[float, Only(0.0)] = 0.0
    logit_bias: Annotated[dict[str, float], Only({})] = Field(default_factory=dict)
    user: str | None = None  # informational

    @field_validator("stream_options")
    @classmethod
    def _only_when_streaming(cls, value: StreamOptions, info: ValidationInfo) -> StreamOptions:
        if not info.data.get("stream"):
            raise PydanticCustomError("invalid_value", "only allowed with stream=true")
        return value

    @abstractmethod
    def prompt_ids(self, ctx: PromptContext) -> list[int]:
        """The prompt as token ids (an `ApiError` if the model cannot take it)."""

    def reports(self) -> tuple[str | None, int | None, int | None]:
        """(the field asking for logprobs, top N per generated token, top N per prompt token)."""
        return None, None, None

    def echo_prompt(self) -> bool:
        return False

    def resolve(self, ctx: PromptContext) -> GenerationRequest:
        """The checks that need the loaded model, then the work to queue."""
        ctx.check_model(self.model)
        prompt_ids = self.prompt_ids(ctx)
        ctx.check_vocab("stop_token_ids", self.stop_token_ids)
        max_tokens = self._max_tokens(len(prompt_ids), ctx.max_context)
        field, logprobs, prompt_logprobs = self.reports()
        if self.stream and (field or self.echo_prompt() or self.return_token_ids):
            name = field or ("echo" if self.echo_prompt() else "return_token_ids")
            raise invalid(name, f"{name} is not supported with stream=true", "unsupported_value")
        if self.min_tokens > max(max_tokens, 1):
            raise invalid("min_tokens", f"min_tokens ({self.min_tokens}) exceeds max_tokens")
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        sampling = SamplingParams(
            max_new_tokens=max(max_tokens, 1),
            temperature=self.temperature,
            top_p=self.top_p,
            seed=self.seed,
            stop_token_ids=tuple(self.stop_token_ids),
            stop_strings=stop,
            ignore_eos=self.ignore_eos,
            top_k=max(self.top_k, 0),
            min_tokens=self.min_tokens,
            logprobs=logprobs,
            prompt_logprobs=prompt_logprobs,
        )
        options = self.stream_options or StreamOptions()
        return GenerationRequest(
            self.KIND,
            prompt_ids,
            sampling,
            self.stream,
            include_usage=options.include_usage,
            continuous_usage=options.include_usage and options.continuous_usage_stats,
            echo=self.echo_prompt(),
            show_generated=max_tokens > 0,
            return_token_ids=self.return_token_ids,
        )

    def _max_tokens(self, prompt_tokens: int, max_context: int) -> int:
        """The requested (or default) max tokens; 0 only with echo (the prompt alone)."""
        room = max_context - prompt_tokens
        if room < 1:
            raise invalid(
                self.PROMPT_FIELD,
                f"the prompt has {prompt_tokens} tokens but the model's context is "
                f"{max_context}; shorten it",
                code="context_length_exceeded",
            )
        field = "max_tokens" if self.max_tokens is not None else "max_completion_tokens"
        given = self.max_tokens if self.max_tokens is not None else self.max_completion_tokens
        max_tokens = given if given is not None else self.DEFAULT_MAX_TOKENS or room
        if max_tokens == 0 and not self.echo_prompt():
            raise invalid(field, f"{field} must be at least 1 (0 only with echo=true)")
        if max_tokens > room:
            raise invalid(
                field,
                f"prompt ({prompt_tokens} tokens) + {field} ({max_tokens}) exceeds the "
                f"model's context of {max_context}; lower {field} to at most {room}",
                code="context_length_exceeded",
            )
        return max_tokens


class CompletionBody(GenerationFields):
    """POST /v1/completions."""

    KIND = "completion"
    PROMPT_FIELD = "prompt"
    DEFAULT_MAX_TOKENS = 16

    prompt: Prompt
    max_tokens: Annotated[int, Field(ge=0)] | None = None  # 0: with echo, the prompt alone
    echo: bool = False
    logprobs: Annotated[int, Field(ge=0, le=MAX_LOGPROBS)] | None = None
    suffix: Annotated[str, Only("")] = ""
    best_of: Annotated[int, Only(0, 1)] = 1
    add_special_tokens: Annotated[bool, Only(False)] = False

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, prompt: Any) -> Any:
        if isinstance(prompt, list) and isinstance(prompt[0], str | list) and len(prompt) > 1:
            raise PydanticCustomError(
                "unsupported_value",
                "this server takes one prompt per request; got a batch of {n}: send them as "
                "separate (concurrent) requests",
                {"n": len(prompt)},
            )
        return prompt

    def reports(self) -> tuple[str | None, int | None, int | None]:
        if self.logprobs is None:
            return None, None, None
        return "logprobs", self.logprobs, self.logprobs if self.echo else None

    def echo_prompt(self) -> bool:
        return self.echo

    def prompt_ids(self, ctx: PromptContext) -> list[int]:
        prompt = self.prompt
        if isinstance(prompt, list) and isinstance(prompt[0], str | list):
            prompt = prompt[0]  # a list holding one prompt
        if isinstance(prompt, str):
            return ctx.text_ids("prompt", prompt)
        return ctx.token_ids("prompt", prompt)


class ChatBody(ChatExtras, GenerationFields):
    """POST /v1/chat/completions."""

    KIND = "chat"
    PROMPT_FIELD = "messages"
    DEFAULT_MAX_TOKENS = None

    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    logprobs: bool = False
    top_logprobs: Annotated[int, Field(ge=0, le=MAX_LOGPROBS)] | None = None
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)  # template variables

    def reports(self) -> tuple[str | None, int | None, int | None]:
        if self.top_logprobs and not self.logprobs:
            raise invalid("top_logprobs", "top_logprobs needs logprobs=true")
        return ("logprobs", self.top_logprobs or 0, None) if self.logprobs else (None, None, None)

    def prompt_ids(self, ctx: PromptContext) -> list[int]:
        messages = [{"role": m.role, "content": m.text()} for m in self.messages]
        return ctx.chat_ids(messages, self.chat_template_kwargs)


class ConfigBody(Body):
    """POST /v1/ddtree/config: any of mode, budget, topk, window (ranges: `DecodeParams`)."""

    model_config = ConfigDict(extra="forbid")  # an admin endpoint: unknown keys are a 400

    mode: Mode | None = None
    budget: int | None = None
    topk: int | None = None
    window: Annotated[int | str | None, must_be("a positive integer or 'none'")] = None

    @model_validator(mode="before")
    @classmethod
    def _null_is_not_given(cls, data: Any) -> Any:
        return data  # `window: null` means "none" here

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


def parse_body(model: type[B], body: Any, strict: bool = True) -> tuple[B, tuple[str, ...]]:
    """Validate a decoded JSON body as `model`: (the model, the unknown fields it carried).

    Unknown fields are a 400 when `strict` (reported before any other problem)."""
    if not isinstance(body, dict):
        raise invalid(None, "the request body must be a JSON object", code="invalid_json")
    unknown = unknown_fields(model, body)
    if unknown and (strict or model.model_config.get("extra") == "forbid"):
        raise invalid(unknown[0], f"unknown field {unknown[0]!r}", code="unknown_field")
    try:
        return model.model_validate(body), tuple(unknown)
    except ValidationError as exc:
        raise from_validation(exc) from None


def parse_generation(kind: str, body: Any, ctx: PromptContext) -> GenerationRequest:
    """A completion ("completion") or chat ("chat") body, validated and resolved."""
    parsed, unknown = parse_body(BODIES[kind], body, strict=ctx.strict)
    return replace(parsed.resolve(ctx), ignored_fields=unknown)


def unknown_fields(model: type[BaseModel], body: dict[str, Any], where: str = "") -> list[str]:
    """Keys of `body` that `model` does not declare (also inside `stream_options`)."""
    out = []
    for key, value in body.items():
        field = model.model_fields.get(key)
        if field is None:
            out.append(f"{where}{key}")
        elif field.annotation is not None and isinstance(value, dict):
            inner = _model_of(field.annotation)
            if inner is StreamOptions:
                out += unknown_fields(inner, value, f"{where}{key}.")
    return out


def _model_of(annotation: Any) -> Any:
    args = getattr(annotation, "__args__", ())
    return next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), annotation)
