"""The server's request bodies as pydantic models, and their resolution into work.

See docs/architecture.md "Server" (request policy). One model per endpoint,
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

from ddtune.params import Mode, SamplingParams
from ddtune.server.errors import from_validation, invalid
from ddtune.server.fields import Only, must_be
from ddtune.server.prompts import PromptContext

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
NullOnly = Annotated[Any, Only()]  # a feature we lack whose only neutral value is null


class Body(BaseModel):
    """A request body or part of one: strict types, `null` = not given, unknown keys dropped
    (`unknown_fields` finds them first)."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _null_is_not_given(cls, data: Any) -> Any:
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data


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


class VllmFields(Body):
    """vLLM's sampling extensions: the supported ones, the rest neutral-only."""

    top_k: Annotated[int, Only(-1, 0)] = -1
    min_p: Annotated[float, Only(0.0)] = 0.0
    min_tokens: Annotated[int, Only(0)] = 0
    stop_token_ids: Annotated[list[int], Field(max_length=64)] = Field(default_factory=list)
    ignore_eos: bool = False
    repetition_penalty: Annotated[float, Only(1.0)] = 1.0
    length_penalty: Annotated[float, Only(1.0)] = 1.0
    include_stop_str_in_output: Annotated[bool, Only(False)] = False
    use_beam_search: Annotated[bool, Only(False)] = False
    bad_words: Annotated[list[str], Only([])] = Field(default_factory=list)
    allowed_token_ids: NullOnly = None
    truncate_prompt_tokens: NullOnly = None
    prompt_logprobs: Annotated[int, Only(0)] = 0
    priority: Annotated[int, Only(0)] = 0
    return_tokens_as_token_ids: Annotated[bool, Only(False)] = False
    guided_json: NullOnly = None
    guided_regex: NullOnly = None
    guided_choice: NullOnly = None
    guided_grammar: NullOnly = None
    structured_outputs: NullOnly = None
    response_format: Annotated[dict[str, Any], Only({"type": "text"})] = Field(
        default_factory=lambda: {"type": "text"}
    )
    request_id: str | None = None  # informational
    cache_salt: str | None = None  # informational (no prefix cache here)


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

    def resolve(self, ctx: PromptContext) -> GenerationRequest:
        """The checks that need the loaded model, then the work to queue."""
        ctx.check_model(self.model)
        prompt_ids = self.prompt_ids(ctx)
        ctx.check_vocab("stop_token_ids", self.stop_token_ids)
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        sampling = SamplingParams(
            max_new_tokens=self._max_tokens(len(prompt_ids), ctx.max_context),
            temperature=self.temperature,
            top_p=self.top_p,
            seed=self.seed,
            stop_token_ids=tuple(self.stop_token_ids),
            stop_strings=stop,
            ignore_eos=self.ignore_eos,
        )
        options = self.stream_options or StreamOptions()
        return GenerationRequest(
            self.KIND,
            prompt_ids,
            sampling,
            self.stream,
            include_usage=options.include_usage,
            continuous_usage=options.include_usage and options.continuous_usage_stats,
        )

    def _max_tokens(self, prompt_tokens: int, max_context: int) -> int:
        room = max_context - prompt_tokens
        if room < 1:
            raise invalid(
                self.PROMPT_FIELD,
                f"the prompt has {prompt_tokens} tokens but the model's context is "
                f"{max_context}; shorten it",
                code="context_length_exceeded",
            )
        given = self.max_tokens if self.max_tokens is not None else self.max_completion_tokens
        max_tokens = given or self.DEFAULT_MAX_TOKENS or room
        if max_tokens > room:
            field = "max_tokens" if self.max_tokens is not None else "max_completion_tokens"
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
    echo: Annotated[bool, Only(False)] = False
    suffix: Annotated[str, Only("")] = ""
    best_of: Annotated[int, Only(0, 1)] = 1
    logprobs: Annotated[int, Only(0)] = 0
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

    def prompt_ids(self, ctx: PromptContext) -> list[int]:
        prompt = self.prompt
        if isinstance(prompt, list) and isinstance(prompt[0], str | list):
            prompt = prompt[0]  # a list holding one prompt
        if isinstance(prompt, str):
            return ctx.text_ids("prompt", prompt)
        return ctx.token_ids("prompt", prompt)


class ChatBody(GenerationFields):
    """POST /v1/chat/completions."""

    KIND = "chat"
    PROMPT_FIELD = "messages"
    DEFAULT_MAX_TOKENS = None

    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    logprobs: Annotated[bool, Only(False)] = False
    top_logprobs: Annotated[int, Only(0)] = 0
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)  # template variables
    tools: Annotated[list[dict[str, Any]], Only([])] = Field(default_factory=list)
    tool_choice: Annotated[str, Only("none", "auto")] = "none"
    parallel_tool_calls: bool | None = None  # informational without tools
    functions: Annotated[list[dict[str, Any]], Only([])] = Field(default_factory=list)
    function_call: Annotated[str, Only("none", "auto")] = "none"
    modalities: Annotated[list[str], Only(["text"])] = Field(default_factory=lambda: ["text"])
    audio: NullOnly = None
    prediction: NullOnly = None
    reasoning_effort: NullOnly = None
    verbosity: NullOnly = None
    web_search_options: NullOnly = None
    chat_template: NullOnly = None
    documents: NullOnly = None
    mm_processor_kwargs: NullOnly = None
    add_generation_prompt: Annotated[bool, Only(True)] = True
    continue_final_message: Annotated[bool, Only(False)] = False
    add_special_tokens: Annotated[bool, Only(False)] = False
    echo: Annotated[bool, Only(False)] = False
    metadata: dict[str, str] | None = None  # informational from here on
    store: bool | None = None
    service_tier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    safety_identifier: str | None = None

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
