"""The results store: one SQLite file per sweep directory, every state change one transaction.

    from ddtune.sweep.store import Store
    store = Store("runs/demo/store.sqlite"); records = store.trial_records(sweep_id)

`schema` (every table), `db` (`Store`: sweeps, trials, attempts, results,
the runner lock), `records` (a sweep read back as `TrialRecord`s),
`load_rows` (`[bench.load]` per-request rows), `slot_tables` (the Ray
backend's slots), `files` (where an attempt keeps its logs).
"""

from ddtune.sweep.store.db import PlannedTrial, SpecChangedError, Store
from ddtune.sweep.store.files import attempt_dir

__all__ = [
    "PlannedTrial",
    "SpecChangedError",
    "Store",
    "attempt_dir",
]
