"""Strict tables: pydantic models for every user-written table, errors as `UserError`.

Every TOML table, JSON body and option set that a user writes is a
`StrictModel` (unknown keys rejected, no silent coercion of strings to
numbers), parsed through `parse_table`, which turns pydantic's
`ValidationError` into one `UserError` whose `key` is the full path of the
first offending setting and whose message names the value and what is
allowed:

    parse_table(BenchMatrix, data, where="bench")
    # UserError("bench.short.max_tokens: must be greater than or equal to 1; got 0",
    #           key="bench.short.max_tokens")
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeVar, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from ddtune.errors import UserError

M = TypeVar("M", bound=BaseModel)


class StrictModel(BaseModel):
    """Base of every user-facing table: unknown keys and lax coercions are errors."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def name_rule(most: int) -> AfterValidator:
    """A name a user gives (a sweep, a slot): 1 to `most` letters, digits, '.', '_' or '-',
    led by a letter or digit (`Annotated[str, name_rule(64)]`)."""
    pattern = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9_.-]{{0,{most - 1}}}$")

    def check(value: str) -> str:
        if not pattern.match(value):
            raise ValueError(
                f"must be 1-{most} letters, digits, '.', '_' or '-' (no leading '.', '_', '-')"
            )
        return value

    return AfterValidator(check)


def parse_table(model: type[M], data: Mapping[str, Any], where: str = "") -> M:
    """Validate `data` as `model`; raise `UserError` naming `where.<key path>`."""
    if not isinstance(data, Mapping):
        raise UserError(f"{where or 'table'} must be a table; got {data!r}", key=where or None)
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise validation_to_user_error(exc, model, where) from None


def validation_to_user_error(
    exc: ValidationError, model: type[BaseModel] | None = None, where: str = ""
) -> UserError:
    """The first error of `exc` as a one-line `UserError` with its key path."""
    err = exc.errors(include_url=False)[0]
    loc = [str(part) for part in err["loc"] if not _is_union_tag(part)]
    key = ".".join([where, *loc] if where else loc) or None
    label = key or "value"
    if err["type"] == "extra_forbidden":
        allowed = allowed_keys(model, loc[:-1]) if model is not None else []
        hint = f"; expected one of {', '.join(allowed)}" if allowed else ""
        return UserError(f"unknown key {label}{hint}", key=key)
    if err["type"] == "missing":
        return UserError(f"{label} is required", key=key)
    if err["type"] == "model_type":  # a value where a table belongs (`sweep = "x"`)
        allowed = allowed_keys(model, loc) if model is not None else []
        keys = f" (its keys: {', '.join(allowed)})" if allowed else ""
        return UserError(f"{label} must be a table{keys}; got {err.get('input')!r}", key=key)
    message = str(err["msg"])
    message = message.removeprefix("Value error, ").removeprefix("Input should be ")
    if err["msg"].startswith("Input should be "):
        message = f"must be {message}"
    return UserError(f"{label}: {message}; got {err.get('input')!r}", key=key)


def allowed_keys(model: type[BaseModel] | None, loc: list[str]) -> list[str]:
    """Field names (as written by the user) of the sub-model at `loc`, if it is one; a field
    marked `exclude=True` is filled by the model itself, never written, so not listed."""
    for part in loc:
        if model is None:
            return []
        if part.isdigit():  # an element of a list of tables: same model
            continue
        field = model.model_fields.get(part) or _by_alias(model, part)
        model = _model_of(field.annotation) if field is not None else None
    if model is None:
        return []
    return sorted(f.alias or name for name, f in model.model_fields.items() if not f.exclude)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model `annotation` names directly or as `Model | None` / `list[Model]`."""
    for candidate in (annotation, *get_args(annotation)):
        plain_class = get_origin(candidate) is None and isinstance(candidate, type)
        if plain_class and issubclass(candidate, BaseModel):
            return candidate
    return None


def _by_alias(model: type[BaseModel], alias: str) -> Any:
    return next((f for f in model.model_fields.values() if f.alias == alias), None)


def _is_union_tag(part: Any) -> bool:
    """pydantic inserts the union member's type name into `loc` (e.g. 'int', 'literal[...]')."""
    return isinstance(part, str) and (
        part in ("int", "float", "str", "bool", "none", "list", "dict")
        or part.startswith(("literal[", "function-", "constrained-", "list[", "dict["))
    )


__all__ = [
    "StrictModel",
    "allowed_keys",
    "name_rule",
    "parse_table",
    "validation_to_user_error",
]
