"""The results store: one SQLite file per sweep directory, every state change one transaction.

    from ddtune.sweep.store import Store
    store = Store("runs/demo/store.sqlite"); records = store.trial_records(sweep_id)

`schema` (every table), `db` (`Store`: sweeps, trials, attempts, results,
the runner lock), `records` (a sweep read back as `TrialRecord`s),
`load_rows` (`[bench.load]` per-request rows), `slot_tables` (the Ray
backend's slots), `modes` (a race's mode, fixed at creation, and when each
trial ran), `files` (where an attempt keeps its logs).
"""

from ddtune.sweep.store.db import PlannedTrial, SpecChangedError, Store
from ddtune.sweep.store.files import attempt_dir
from ddtune.sweep.store.modes import SweepMode, read_mode

__all__ = [
    "PlannedTrial",
    "SpecChangedError",
    "Store",
    "SweepMode",
    "attempt_dir",
    "read_mode",
]
