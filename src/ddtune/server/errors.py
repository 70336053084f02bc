"""OpenAI-style HTTP errors: `{"error": {"message", "type", "param", "code"}}`.

Every bad request raises `ApiError`; the app turns it into a JSON body whose
`param` names the offending field, so a client (or a person) knows what to fix.
"""

from __future__ import annotations

from typing import Any


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


def unavailable(message: str, code: str, retry_after: int | None = None) -> ApiError:
    """A 503: loading, shutting down or queue full (with `Retry-After` seconds)."""
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return ApiError(503, message, code=code, headers=headers)


def _default_type(status: int) -> str:
    if status == 404:
        return "not_found_error"
    if status < 500:
        return "invalid_request_error"
    if status == 503:
        return "service_unavailable"
    return "server_error"
