"""The FastAPI app: OpenAI endpoints plus identity, health, metrics and hot reconfigure.

GET  /v1/models                  the one served model
GET  /v1/models/{id}             that model (404 for any other id)
POST /v1/completions             OpenAI completions (stream or not)
POST /v1/chat/completions        OpenAI chat completions (stream or not)
GET  /health                     200 serving, 503 loading / shutting down
GET  /health_generate            200 only after a real 1-token generation
GET  /server_info                identity, config, config_hash/generation, weights
GET  /metrics                    Prometheus text format (per-app registry)
GET  /v1/ddtree/config           the live decoding config
POST /v1/ddtree/config           change mode/budget/topk/window between requests
GET  /openapi.json, /docs        the schema (request and response models) and its viewer

See docs/server.md "Server".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from ddtune import __version__
from ddtune.server.api import generation
from ddtune.server.api.errors import ApiError, unavailable
from ddtune.server.api.prompts import check_model
from ddtune.server.api.requests import ChatBody, CompletionBody, ConfigBody, parse_body
from ddtune.server.api.schema import (
    ChatCompletionResponse,
    CompletionResponse,
    ConfigReply,
    DocumentedApp,
    Health,
    ModelCard,
    ModelList,
    ServerInfo,
    body,
    ok,
)
from ddtune.server.identity import system_fingerprint
from ddtune.server.limits import BodyGuard, BodyProblem
from ddtune.server.state import ServerState
from ddtune.server.worker import QueueFull

log = logging.getLogger("ddtune.server")

# The generation routes: path, kind (`generation.handle`), route name (the schema's
# operationId starts with it), request body model, response model.
GENERATION_ROUTES = (
    ("/v1/completions", "completion", "completions", CompletionBody, CompletionResponse),
    ("/v1/chat/completions", "chat", "chat_completions", ChatBody, ChatCompletionResponse),
)


def create_app(state: ServerState) -> FastAPI:
    """The app: body limits, OpenAI-style errors, the OpenAI routes and ddtune's own."""
    app = DocumentedApp(title="ddtune serve", version=__version__, redoc_url=None)
    _install_error_handlers(app)
    app.add_middleware(
        BodyGuard,
        max_bytes=state.config.max_request_bytes,
        timeout_s=state.config.body_timeout_seconds,
    )
    _add_openai_routes(app, state)
    _add_admin_routes(app, state)
    return app


def _add_openai_routes(app: FastAPI, state: ServerState) -> None:
    """`/v1/models[/{id}]`, `/v1/completions`, `/v1/chat/completions`."""

    @app.get("/v1/models", responses=ok(ModelList))
    async def models() -> JSONResponse:
        return JSONResponse({"object": "list", "data": [_model_card(state)]})

    @app.get("/v1/models/{model_id:path}", responses=ok(ModelCard))
    async def model(model_id: str) -> JSONResponse:
        check_model(model_id, state.model_name)
        return JSONResponse(_model_card(state))

    for path, kind, name, request_model, response_model in GENERATION_ROUTES:
        app.add_api_route(
            path,
            _generation_endpoint(state, kind),
            methods=["POST"],
            name=name,
            openapi_extra=body(request_model),
            responses=ok(response_model, stream=True),
        )


def _generation_endpoint(
    state: ServerState, kind: str
) -> Callable[[Request], Coroutine[Any, Any, Response]]:
    """The handler of one generation route: `generation.handle` for that kind."""

    async def generate(request: Request) -> Response:
        return await generation.handle(request, state, kind)

    return generate


def _add_admin_routes(app: FastAPI, state: ServerState) -> None:
    """Health, identity, metrics and the hot reconfigure endpoint."""

    @app.get("/health", responses=ok(Health))
    async def health() -> JSONResponse:
        status = 200 if state.phase == "serving" else 503
        return JSONResponse({"status": state.phase}, status_code=status)

    @app.get("/health_generate", responses=ok(Health))
    async def health_generate() -> JSONResponse:
        return JSONResponse(await _one_token_health(state))

    @app.get("/server_info", responses=ok(ServerInfo))
    async def server_info() -> JSONResponse:
        return JSONResponse(state.server_info())

    @app.get("/metrics", responses={200: {"content": {"text/plain": {}}, "description": "OK"}})
    async def metrics() -> Response:
        return Response(state.metrics.render(), media_type=state.metrics.content_type)

    @app.get("/v1/ddtree/config", responses=ok(ConfigReply))
    async def get_config() -> JSONResponse:
        return JSONResponse(_config_reply(state))

    @app.post("/v1/ddtree/config", openapi_extra=body(ConfigBody), responses=ok(ConfigReply))
    async def set_config(request: Request) -> JSONResponse:
        config_body, _ = parse_body(ConfigBody, await generation.read_json(request))
        params, generation_ = state.reconfigure(config_body.updates())
        log.info("reconfigured to %s (generation %d)", params.label(), generation_)
        return JSONResponse(_config_reply(state))


async def _one_token_health(state: ServerState) -> dict[str, Any]:
    """A real 1-token generation through the worker queue; 503 when it cannot run."""
    state.require_serving()
    started = time.monotonic()
    try:
        outcome = await asyncio.to_thread(
            state.generate_blocking, state.warmup_ids(), 1, state.config.health_timeout_s
        )
    except QueueFull:
        raise unavailable("the request queue is full", "queue_full", retry_after=1) from None
    if outcome is None or outcome.error is not None or outcome.result is None:
        why = "timed out" if outcome is None else f"failed: {outcome.error}"
        raise unavailable(f"the 1-token health generation {why}", "generation_failed")
    seconds = round(time.monotonic() - started, 4)
    return {"status": "ok", "seconds": seconds, "instance_id": state.identity.instance_id}


def _model_card(state: ServerState) -> dict[str, Any]:
    return {
        "id": state.model_name,
        "object": "model",
        "owned_by": "ddtune",
        "created": int(state.identity.started_at),
        "max_model_len": getattr(state.engine, "max_context", None),
    }


def _config_reply(state: ServerState) -> dict[str, Any]:
    params, generation_ = state.current()
    return {
        "instance_id": state.identity.instance_id,
        "config": state.config_dict(),
        "config_hash": params.hash(),
        "config_generation": generation_,
        "system_fingerprint": system_fingerprint(params, generation_),
    }


def allowed_methods(app: FastAPI, path: str) -> list[str]:
    """The methods some route serves at `path` (Starlette names only the first route's)."""
    methods = {
        method
        for route in app.routes
        if isinstance(route, APIRoute) and route.path_regex.match(path)
        for method in route.methods or ()
    }
    return sorted(methods)


async def drain_body(request: Request) -> None:
    """Read and drop a body no route took (a 404 or 405 with a body; the size limit holds).

    Unread, its bytes sit in the socket when the server closes it, and the
    kernel then resets the connection (RST): a client still sending, or not
    yet done reading, loses the answer ("connection reset by peer").
    """
    try:
        async for _ in request.stream():
            pass
    except (ClientDisconnect, RuntimeError, ApiError):  # gone, already read, or over a limit
        return


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        if isinstance(exc, BodyProblem):
            log.warning(exc.log_line)
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        await drain_body(request)
        error = ApiError(exc.status_code, str(exc.detail), code=f"http_{exc.status_code}")
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # every method of the path, not just the first route's
            headers["Allow"] = ", ".join(allowed_methods(app, request.url.path))
        return JSONResponse(error.body(), status_code=exc.status_code, headers=headers)

    @app.exception_handler(ClientDisconnect)
    async def client_gone(request: Request, _: ClientDisconnect) -> Response:
        log.warning("client disconnected during %s %s", request.method, request.url.path)
        return Response(status_code=400)  # nobody reads it

    @app.exception_handler(Exception)
    async def crash(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        error = ApiError(500, f"internal error: {type(exc).__name__}: {exc}", code="internal")
        return JSONResponse(error.body(), status_code=500)
