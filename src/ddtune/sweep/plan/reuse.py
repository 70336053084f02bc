"""The baseline's start from an earlier sweep of the same service and bench, for strategy
predict to confirm with instead of starting the baseline first.

    earlier = earlier_start(store, sweep, baseline, serves)   # None: no earlier sweep has one

An earlier sweep of the store qualifies when its stored spec measures the baseline as this
one does: the same `[service]`, `[bench]` and baseline config, their run settings aside
(timeouts, retry...: what a resume may change, `spec/changes.py`). Of the baseline's
starts there that ended before this sweep was created, the latest one whose benches all
finished with a value and whose first bench holds what this sweep's forecast reads from
the baseline (`serves`: its answers as token ids, its timed forwards) is taken, every
bench of it, with its times on this sweep's clock (negative hours: the drift between the
two sweeps stays in the race's model), from the newest sweep that has one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ddtune.records import TrialRecord
from ddtune.sweep.spec.changes import BASELINE_MEASURED_BY, measured_change
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.modes import trial_times
from ddtune.sweep.store.rows import SweepRow


@dataclass(frozen=True)
class EarlierStart:
    """One start of the baseline in an earlier sweep: its benches in order, each bench's end
    in hours from this sweep's creation."""

    sweep: str
    benches: tuple[tuple[TrialRecord, float], ...]

    def words(self) -> str:
        hours = -self.benches[-1][1]
        return (
            f"its start in sweep {self.sweep} ({len(self.benches)} bench(es), ended {hours:.1f} h "
            "before this sweep began)"
        )


def earlier_start(
    store: Store,
    sweep: SweepRow,
    baseline: str,
    serves: Callable[[TrialRecord], bool],
    value: Callable[[TrialRecord], float | None],
) -> EarlierStart | None:
    """The start to reuse (module docstring); `value`: a bench's objective (None: no value)."""
    for other_id, name in reversed(list(zip(store.sweep_ids(), store.sweep_names(), strict=True))):
        if other_id >= sweep.id:
            continue
        other = store.sweep_row(name)
        if measured_change(other.spec_text, sweep.spec_text, BASELINE_MEASURED_BY) is not None:
            continue
        starts = _starts(store, other_id, baseline, sweep.created_at)
        for benches in reversed(starts):
            complete = all(r.status == "done" and value(r) is not None for r, _ in benches)
            if complete and serves(benches[0][0]):
                return EarlierStart(name, tuple(benches))
    return None


def _starts(
    store: Store, sweep_id: int, baseline: str, since: float
) -> list[list[tuple[TrialRecord, float]]]:
    """The baseline's starts in sweep `sweep_id` that ended before `since`, in time order:
    a trial whose attempt restarted the server opens one."""
    times = trial_times(store, sweep_id, since)
    ran = sorted(
        (
            (times[r.trial_id], r)
            for r in store.trial_records(sweep_id)
            if r.label == baseline and r.trial_id in times
        ),
        key=lambda pair: pair[0][0],
    )
    starts: list[list[tuple[TrialRecord, float]]] = []
    for (hours, fresh), record in ran:
        if hours >= 0:  # ended after this sweep began (the earlier one resumed since)
            break
        if fresh or not starts:
            starts.append([])
        starts[-1].append((record, hours))
    return starts


__all__ = ["EarlierStart", "earlier_start"]
