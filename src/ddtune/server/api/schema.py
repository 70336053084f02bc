"""The OpenAPI document: response models, and request bodies from `requests.py`.

See docs/server.md "Server". The generation handlers read their body
themselves (size and time limits, strict JSON, validation off the event
loop), so FastAPI cannot infer the request schema; `DocumentedApp` adds
the request models' JSON schemas and each route names its own with
`body(...)`. Responses are documented by the models below; the tests check
that what `responses.py` builds validates against them.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import models_json_schema

from ddtune.server.api.requests import ChatBody, CompletionBody, ConfigBody

REQUEST_MODELS: tuple[type[BaseModel], ...] = (CompletionBody, ChatBody, ConfigBody)
REF = "#/components/schemas/{model}"


class Out(BaseModel):
    model_config = ConfigDict(extra="allow")  # documented keys; more may come


class ErrorDetail(Out):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(Out):
    error: ErrorDetail


class SpecUsage(Out):
    rounds: int
    accepted_tokens: int
    mean_acceptance_length: float
    mean_batch_size: float = 1.0  # requests that shared its rounds, on average


class Usage(Out):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    spec: SpecUsage | None = None


class CompletionLogprobs(Out):
    tokens: list[str]
    token_logprobs: list[float | None]
    top_logprobs: list[dict[str, float] | None]
    text_offset: list[int]


FinishReason = Literal["stop", "length", "abort"] | None


class CompletionChoice(Out):
    index: int
    text: str
    logprobs: CompletionLogprobs | None
    finish_reason: FinishReason


class Head(Out):
    id: str
    created: int
    model: str
    system_fingerprint: str


class CompletionResponse(Head):
    object: Literal["text_completion"]
    choices: list[CompletionChoice]
    usage: Usage | None = None


class TopLogprob(Out):
    token: str
    logprob: float
    bytes: list[int] | None


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChatLogprobs(Out):
    content: list[TokenLogprob] | None


class AssistantMessage(Out):
    role: Literal["assistant"]
    content: str | None
    refusal: None = None


class ChatChoice(Out):
    index: int
    message: AssistantMessage
    logprobs: ChatLogprobs | None
    finish_reason: FinishReason


class ChatCompletionResponse(Head):
    object: Literal["chat.completion"]
    choices: list[ChatChoice]
    usage: Usage | None = None


class ModelCard(Out):
    id: str
    object: Literal["model"]
    owned_by: str
    created: int
    max_model_len: int | None


class ModelList(Out):
    object: Literal["list"]
    data: list[ModelCard]


class Health(Out):
    status: str


class ServerInfo(Out):
    instance_id: str
    pid: int
    started_at: float
    ready_at: float | None
    state: str
    model: str
    config: dict[str, Any]
    config_hash: str
    config_generation: int
    max_context: int | None
    versions: dict[str, str]


class ConfigReply(Out):
    instance_id: str  # the server process; a restarted server has another
    config: dict[str, Any]
    config_hash: str
    config_generation: int
    system_fingerprint: str  # what responses decoded under this config carry


ERRORS: dict[int | str, dict[str, Any]] = {
    "default": {"model": ErrorResponse, "description": "An error in the OpenAI shape"}
}
SSE = {"text/event-stream": {"schema": {"type": "string"}}}


def ok(model: type[BaseModel], stream: bool = False) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route answering `model` (and SSE when `stream`), else an error."""
    answer: dict[str, Any] = {"model": model, "description": "OK"}
    if stream:
        answer["content"] = SSE
    return {200: answer, **ERRORS}


def body(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra=` naming a route's JSON request body."""
    schema = {"$ref": REF.format(model=model.__name__)}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


class DocumentedApp(FastAPI):
    """FastAPI whose /openapi.json also holds the request models' schemas (`components`)."""

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema is None:
            schema = get_openapi(title=self.title, version=self.version, routes=self.routes)
            _, defs = models_json_schema(
                [(model, "validation") for model in REQUEST_MODELS], ref_template=REF
            )
            schema.setdefault("components", {}).setdefault("schemas", {}).update(defs["$defs"])
            self.openapi_schema = schema
        return self.openapi_schema
