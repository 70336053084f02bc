"""The baseline's start from an earlier sweep of the same service and bench, for strategy
predict to confirm with instead of starting the baseline first.

    earlier = earlier_start(store, spec, baseline, serves, value)   # None: no sweep has one
    mode = replace(mode, reused=earlier.to_json())                  # fixed with the new sweep

An earlier sweep of the store qualifies when its stored spec measures the baseline as this
one does: the same spec folder, the same `[service]`, `[bench]` and baseline config, their
run settings aside (timeouts, retry...: what a resume may change, `spec/changes.py`; the
served model name counts). Of the baseline's starts there, the latest one whose benches all
finished with a value and whose first bench holds what this sweep's forecast reads from the
baseline (`serves`: its answers as token ids, its timed forwards) is taken, every bench of
it with when it ended, from the newest sweep that has one. It is looked up once, when the
new sweep is created, and stored with its mode (`store/modes.py`), so a resume replays it
whatever becomes of the earlier sweep.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from ddtune.records import TrialRecord
from ddtune.sweep.plan.races.by_start import counted
from ddtune.sweep.plan.spread import config_starts
from ddtune.sweep.spec.changes import BASELINE_MEASURED_BY, OPERATIONAL, measured_change
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.store.db import Store

# a resume may change these; a reused start must not: another served model is another baseline
_RUN_SETTINGS = tuple(key for key in OPERATIONAL if key != "service.model")


@dataclass(frozen=True)
class EarlierStart:
    """One start of the baseline in an earlier sweep: its benches in order, each with when it
    ended (seconds since the epoch)."""

    sweep: str
    benches: tuple[tuple[TrialRecord, float], ...]

    def hours(self, since: float) -> tuple[float, ...]:
        """Each bench's end in hours from `since` (a sweep's creation: negative)."""
        return tuple((ended - since) / 3600 for _, ended in self.benches)

    def words(self, since: float) -> str:
        before = -self.hours(since)[-1]
        return (
            f"its start in sweep {self.sweep} ({len(self.benches)} bench(es), ended "
            f"{before:.1f} h before this sweep)"
        )

    def to_json(self) -> str:
        benches = [{"record": record.to_dict(), "ended": ended} for record, ended in self.benches]
        return json.dumps({"sweep": self.sweep, "benches": benches})

    @classmethod
    def from_json(cls, text: str) -> EarlierStart:
        data = json.loads(text)
        benches = tuple(
            (TrialRecord.from_dict(b["record"]), float(b["ended"])) for b in data["benches"]
        )
        return cls(str(data["sweep"]), benches)


def earlier_start(
    store: Store,
    spec: SweepSpec,
    baseline: str,
    serves: Callable[[TrialRecord], bool],
    value: Callable[[TrialRecord], float | None],
) -> EarlierStart | None:
    """The start a sweep of `spec` created now takes (module docstring); `value`: a bench's
    objective (None: no value)."""
    for sweep_id, name in reversed(list(zip(store.sweep_ids(), store.sweep_names(), strict=True))):
        other = store.sweep_row(name)
        if other.spec_dir != spec.base_dir or _measures_otherwise(other.spec_text, spec.text):
            continue
        starts = config_starts(store, sweep_id, lambda r: r.label == baseline, since=0.0)
        for _, benches in reversed(starts):
            if all(counted(value(r)) for r, _ in benches) and serves(benches[0][0]):
                return EarlierStart(name, tuple((r, hours * 3600) for r, hours in benches))
    return None


def _measures_otherwise(stored_text: str, text: str) -> bool:
    change = measured_change(stored_text, text, BASELINE_MEASURED_BY, _RUN_SETTINGS)
    return change is not None


__all__ = ["EarlierStart", "earlier_start"]
