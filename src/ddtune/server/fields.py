"""Field policies for the request models: what a known field may hold.

See docs/architecture.md "Server" (request policy). A field of the OpenAI or
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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, ValidationError, WrapValidator
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
