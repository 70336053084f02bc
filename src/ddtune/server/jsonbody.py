"""Decode a request body into JSON values the rest of the server can trust.

See docs/server.md "Server" (limits). `decode_json(raw)` accepts only
strict JSON text in UTF-8 (RFC 8259): no BOM, no NaN/Infinity, integers of at
most `MAX_INT_DIGITS` digits, nesting at most `MAX_DEPTH` deep, and strings (keys
included) that are valid Unicode — a `\\ud800` escape decodes to a lone
surrogate that no tokenizer, template or UTF-8 encoder can take. Every
failure is a 400 (`invalid_json`, or `invalid_value` naming where a lone
surrogate sits) instead of a `RecursionError`, `ValueError` or a crash later.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ddtune.server.api.errors import ApiError, invalid

MAX_DEPTH = 64
MAX_INT_DIGITS = 100  # far above any field's range; Python's own limit (4300) raises late
# A \uD800-\uDFFF escape: the only way a lone surrogate can enter (raw UTF-8 cannot hold one).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def decode_json(raw: bytes) -> Any:
    """The JSON value in `raw`, or an `ApiError` (400) saying what is wrong with it."""
    try:
        text = raw.decode("utf-8")
        value = json.loads(text, parse_constant=_no_constant, parse_int=_parse_int)
    except RecursionError:
        raise _bad("it is nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise _bad(f"it is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:  # JSONDecodeError, NaN/Infinity, a huge integer literal
        raise _bad(str(exc)) from None
    check_value(value, surrogates=_SURROGATE_ESCAPE.search(raw) is not None)
    return value


def check_value(value: Any, surrogates: bool = True) -> None:
    """Depth at most `MAX_DEPTH`; with `surrogates`, no string holding a lone surrogate."""
    if surrogates:
        _check_text(value, ())
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 1, ())]
    while stack:
        node, depth, path = stack.pop()
        if not isinstance(node, dict | list):
            continue
        if depth > MAX_DEPTH:
            raise _bad(f"it is nested more than {MAX_DEPTH} deep")
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            if surrogates and isinstance(key, str) and not _is_unicode(key):
                raise invalid(None, f"a key in {_where(path)} holds a lone UTF-16 surrogate")
            if isinstance(child, dict | list):
                stack.append((child, depth + 1, (*path, key)))
            elif surrogates:
                _check_text(child, (*path, key))


def _check_text(value: Any, path: tuple[str | int, ...]) -> None:
    if isinstance(value, str) and not _is_unicode(value):
        where = _where(path)
        raise invalid(
            where if path else None,
            f"{where} holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape); "
            "send valid Unicode text",
        )


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _where(path: tuple[str | int, ...]) -> str:
    """`("messages", 0, "content")` → `messages[0].content` (keys made printable)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            printable = part.encode("utf-8", "backslashreplace").decode("ascii", "replace")
            out += f".{printable}" if out else printable
    return out or "the body"


def _parse_int(literal: str) -> int:
    digits = len(literal.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise ValueError(f"an integer has {digits} digits; at most {MAX_INT_DIGITS} are allowed")
    return int(literal)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _bad(why: str) -> ApiError:
    return invalid(None, f"the request body is not valid JSON: {why}", code="invalid_json")
