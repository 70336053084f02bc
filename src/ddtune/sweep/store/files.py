"""Where a store keeps each attempt's files, and which log an attempt left.

`attempt_dir` is `<store dir>/trials/<id>-<label>-r<repeat>/attempt-<n>`; an
attempt that stored no log path (interrupted, or its runner killed) shows the
log found there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ddtune.records import TrialRecord
    from ddtune.sweep.store.rows import AttemptRow
from ddtune.sweep.store.db import Store

ATTEMPT_LOGS = ("log_tail.txt", "service.log", "hooks.log")  # first found is shown


def attempt_dir(workdir: Path, trial_id: int, label: str, repeat: int, number: int) -> Path:
    """The folder of one attempt's files (service.log, log_tail.txt, hooks.log)."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-")[:40]
    return workdir / "trials" / f"{trial_id:04d}-{slug}-r{repeat}" / f"attempt-{number}"


def attempt_log(store: Store, record: TrialRecord, attempt: AttemptRow) -> str | None:
    """The attempt's stored log path, else the log its folder holds (an interrupted attempt)."""
    if attempt["log_tail_path"]:
        return str(attempt["log_tail_path"])
    folder = attempt_dir(
        store.path.parent.resolve(), record.trial_id, record.label, record.repeat, attempt["number"]
    )
    found = [folder / name for name in ATTEMPT_LOGS if (folder / name).is_file()]
    return str(found[0]) if found else None


def failed_attempts(
    store: Store, records: Iterable[TrialRecord]
) -> Iterator[tuple[TrialRecord, AttemptRow, str | None]]:
    """Each failed or interrupted attempt of `records`, with its log (see `attempt_log`)."""
    for record in records:
        for attempt in store.attempts(record.trial_id):
            if attempt["state"] in ("failed", "interrupted"):
                yield record, attempt, attempt_log(store, record, attempt)
