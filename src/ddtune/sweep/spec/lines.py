"""Where a setting is written in a TOML text: the line of a full key path.

`tomllib` keeps no positions, so the sweep spec loader scans the text once
for table headers and `key =` lines, and turns the key path of a `UserError`
(`configs.1.topk`, `bench.short.max_tokens`) into `file:line`. A path that is
not written as such (a default, an inline table, a list element) falls back
to its nearest enclosing key or table. See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?")
_KEY = re.compile(r"""^\s*("[^"]+"|'[^']+'|[A-Za-z0-9_\-]+)\s*=""")


class KeyLines:
    """Line numbers of the `key =` lines and `[table]` headers of one TOML text."""

    def __init__(self, text: str) -> None:
        self.keys: dict[tuple[str, int, str], int] = {}  # (table, array index, key) -> line
        self.headers: dict[tuple[str, int], int] = {}  # (table, array index) -> line
        table, index = "", 0
        arrays: dict[str, int] = {}  # [[name]] -> index of its latest element
        for number, line in enumerate(text.splitlines(), start=1):
            if header := _HEADER.match(line):
                table = header.group(2).replace('"', "").replace(" ", "")
                if header.group(1) == "[[":
                    index = arrays[table] = arrays.get(table, -1) + 1
                else:  # [configs.vars] belongs to the latest [[configs]]
                    parent = next((a for a in arrays if table.startswith(a + ".")), None)
                    index = arrays[parent] if parent else 0
                self.headers.setdefault((table, index), number)
            elif key := _KEY.match(line):
                self.keys.setdefault((table, index, key.group(1).strip("\"'")), number)

    def line_of(self, path: str) -> int | None:
        """Line of `path` (numeric parts index `[[arrays]]`), else of what encloses it."""
        parts = path.split(".") if path else []
        while parts:
            *head, last = parts
            table = ".".join(p for p in head if not p.isdigit())
            index = next((int(p) for p in reversed(head) if p.isdigit()), 0)
            if last.isdigit():
                found = self.headers.get((table, int(last)))
            else:
                found = self.keys.get((table, index, last)) or self.headers.get(
                    (f"{table}.{last}".strip("."), index)
                )
            if found:
                return found
            parts = head
        return None


__all__ = ["KeyLines"]
