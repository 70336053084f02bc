"""Field policies for the request models: what a known field may hold.

See docs/server.md "Server" (request policy). A field of the OpenAI or
vLLM API is one of

- supported: typed normally (and implemented);
- neutral-only (`Only(...)`): a feature this server does not have, accepted
  with the values that leave behaviour unchanged (`n: 1`, `tools: []`),
  anything else is a 400 `unsupported_value` naming the field; the OpenAPI
  schema lists the accepted values as an `enum`;
- `Only()` with no values: accepted only as `null` (= absent);
- informational (`metadata`, `store`, `user`, ...): any value of its type,
  accepted and ignored because it cannot change the output.

`must_be(...)` replaces a union's per-member errors with one message.
`VllmFields` and `ChatExtras` declare the extension fields of vLLM and
OpenAI's chat API under these policies (`requests.py` builds the bodies).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationError,
    WrapValidator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema


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


class Only:
    """A field we cannot honour: accepted only with one of its neutral values (or null)."""

    def __init__(self, *neutral: Any) -> None:
        self.neutral = neutral

    def allowed(self) -> str:
        return " or ".join(repr(v) for v in self.neutral) if self.neutral else "null"

    def check(self, value: Any, handler: Callable[[Any], Any]) -> Any:
        try:
            value = handler(value)
        except ValidationError:
            value = _NOT_NEUTRAL  # any other type is no neutral value either
        if not any(type(value) is type(v) and value == v for v in self.neutral):
            raise PydanticCustomError(
                "unsupported_value",
                "only {allowed} is supported by this server",
                {"allowed": self.allowed()},
            )
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_wrap_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        if not self.neutral:
            return {"type": "null"}
        return {**handler(schema), "enum": list(self.neutral)}


_NOT_NEUTRAL = object()


NullOnly = Annotated[Any, Only()]  # a feature we lack whose only neutral value is null


class Body(BaseModel):
    """A request body or part of one: strict types, `null` = not given, unknown keys dropped
    (`unknown_fields` finds them first)."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _null_is_not_given(cls, data: Any) -> Any:
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data


class VllmFields(Body):
    """vLLM's sampling extensions: the supported ones, the rest neutral-only."""

    top_k: Annotated[int, Field(ge=-1)] = -1  # -1 or 0: off
    min_p: Annotated[float, Only(0.0)] = 0.0
    min_tokens: Annotated[int, Field(ge=0)] = 0
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
    return_token_ids: bool = False  # the answer carries prompt_token_ids and token_ids
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


class ChatExtras(Body):
    """OpenAI chat (and vLLM chat) fields we lack: neutral-only, or informational."""

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
