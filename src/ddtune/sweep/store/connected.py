"""What the store's helper modules need of `Store`, as protocols (so they never import `db`).

`modes`, `records` and `slot_tables` hold the store's reads and writes by
topic; `Store` (`db.py`) calls them and they take it back as an argument.
Typing that argument as `Store` would close a circle `db` -> helper -> `db`
(one a reader follows as surely as Python does), so they name only what
they use: `Connected` (the connection and its write transaction) and
`TrialReader` (a sweep's trials and attempts read back). `Store` satisfies
both structurally; mypy checks it at every call.
"""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from typing import Protocol

from ddtune.sweep.spec.parse import Config
from ddtune.sweep.store.rows import AttemptRow, TrialRow


class Connected(Protocol):
    """An open store: its SQLite connection and one write transaction at a time."""

    @property
    def db(self) -> sqlite3.Connection: ...

    def tx(self) -> AbstractContextManager[sqlite3.Connection]: ...


class TrialReader(Connected, Protocol):
    """An open store that reads a sweep's trials and their attempts back."""

    def trials(self, sweep_id: int, statuses: tuple[str, ...] = ...) -> list[TrialRow]: ...

    def attempts(self, trial_id: int) -> list[AttemptRow]: ...

    def trial_config(self, trial: TrialRow) -> Config: ...


__all__ = ["Connected", "TrialReader"]
