"""OpenAI-style HTTP errors: `{"error": {"message", "type", "param", "code"}}`.

See docs/server.md "Server". Every bad request raises `ApiError`; the
app turns it into a JSON body whose `param` names the offending field, so a
client (or a person) knows what to fix. A request body that fails its pydantic
model becomes one `ApiError` through `from_validation`: `param` is the error's
location (`messages[0].content`), never read out of a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

# Error types our request models raise (PydanticCustomError) that are also the `code`.
OWN_CODES = ("invalid_value", "unsupported_value")
PYDANTIC_CODES = {"extra_forbidden": "unknown_field", "missing": "missing_field"}


class ApiError(Exception):
    """An error answered to the client; the server keeps serving."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type or _default_type(status)
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def invalid(param: str | None, message: str, code: str = "invalid_value") -> ApiError:
    """A 400 for one bad request field."""
    return ApiError(400, message, param=param, code=code)


def from_validation(exc: ValidationError) -> ApiError:
    """A 400 for the first problem pydantic found (an unknown field comes first)."""
    errors = exc.errors(include_url=False)
    err = min(errors, key=lambda e: e["type"] != "extra_forbidden")
    param = location(err["loc"])
    kind = err["type"]
    code = kind if kind in OWN_CODES else PYDANTIC_CODES.get(kind, "invalid_value")
    if kind == "extra_forbidden":
        return invalid(param, f"unknown field {param!r}", code=code)
    if kind == "missing":
        return invalid(param, f"{param or 'a field'} is required", code=code)
    text = str(err["msg"]).replace("Input should be ", "must be ", 1)
    detail = f"{param}: {text}; got {_short(err.get('input'))}" if param else text
    return invalid(param, detail, code=code)


def location(loc: Sequence[int | str]) -> str | None:
    """`("messages", 0, "content")` → `messages[0].content`; `()` → None."""
    text = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)
    return text.removeprefix(".") or None


def unavailable(message: str, code: str, retry_after: int | None = None) -> ApiError:
    """A 503: loading, shutting down or queue full (with `Retry-After` seconds)."""
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return ApiError(503, message, code=code, headers=headers)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _default_type(status: int) -> str:
    if status == 404:
        return "not_found_error"
    if status < 500:
        return "invalid_request_error"
    if status == 503:
        return "service_unavailable"
    return "server_error"
