"""Errors shared by every package (see docs/architecture.md)."""

from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input or files.

    The message says what was wrong and what to do; the CLI prints it as one
    line and exits with code 2, without a traceback. `key` is the full path of
    the offending setting (e.g. `bench.short.max_tokens`) when there is one,
    so callers never parse the message to find it.
    """

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key
