"""A TOML spec written by hand-sized pieces: tables with a comment per key where it helps.

    text = document([Table("sweep", {...}, comments={"strategy": "why"}), ...], header)

Values are written as TOML (strings JSON-quoted, which TOML's basic strings
read the same; lists and inline tables); a `command` argv is written one flag
and its value a line, so a user can read and edit it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass
class Table:
    """One `[name]` (or `[[name]]` when `array`) table and the comments beside its keys."""

    name: str
    values: Mapping[str, Any]
    comments: Mapping[str, str] = field(default_factory=dict)
    header: Sequence[str] = ()  # comment lines above the table
    array: bool = False


def document(tables: Sequence[Table], header: Sequence[str]) -> str:
    """The whole file: the header comment, then each table."""
    lines = [f"# {line}".rstrip() for line in header]
    for table in tables:
        lines += ["", *(f"# {line}".rstrip() for line in table.header)]
        lines.append(f"[[{table.name}]]" if table.array else f"[{table.name}]")
        for key, value in table.values.items():
            text = f"{key_text(key)} = {value_text(value, key)}"
            comment = table.comments.get(key)
            lines.append(f"{text}  # {comment}" if comment else text)
    return "\n".join(lines) + "\n"


def key_text(key: str) -> str:
    return key if BARE_KEY.match(key) else json.dumps(key)


def value_text(value: Any, key: str = "") -> str:
    """A TOML value; a long argv (`command`) one flag and its value a line."""
    if key == "command" and isinstance(value, list):
        return _argv(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        inner = ", ".join(f"{key_text(k)} = {value_text(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    raise TypeError(f"no TOML form for {value!r}")


def _argv(argv: list[str]) -> str:
    groups: list[list[str]] = []
    for arg in argv:
        if (
            groups
            and not arg.startswith("-")
            and groups[-1][-1].startswith("-")
            and len(groups[-1]) == 1
        ):
            groups[-1].append(arg)
        else:
            groups.append([arg])
    rows = ["    " + ", ".join(json.dumps(a, ensure_ascii=False) for a in g) + "," for g in groups]
    return "[\n" + "\n".join(rows) + "\n]"


__all__ = ["Table", "document", "value_text"]
