"""Reading JSON Lines files: one JSON value per line, blank lines skipped.

The one JSONL reader of the project (bench prompts, training and held-out
tasks, the bench suites, the user's traffic file); a `.gz` file is read
through gzip (HumanEval ships that way). A line that is not JSON is a `UserError`
naming `path:line`, so callers only check the fields they need.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ddtune.errors import UserError


def jsonl_rows(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(1-based line number, parsed value) for every non-blank line of `path`."""
    path = Path(path)
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
        yield number, row


__all__ = ["jsonl_rows"]
