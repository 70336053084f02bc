"""A sweep's finished trials in run order, each read from the store once (linear over a sweep).

    finished = Finished(store, sweep_id)
    new = finished.update()     # finished since the last call, in run order up to the first
                                # unfinished trial; None: a trial folded before was reopened

A strategy folds what `update` returns into its state, so a run builds each trial's
record (samples and outputs parsed) once, not once per planning step. When a
trial folded before is no longer as it was (the breaker or `sweep retry` reopened
it), `update` starts over and returns None: the strategy folds again from the
start, so it decides exactly as a fresh run over the same store would.
"""

from __future__ import annotations

from ddtune.records import TrialRecord
from ddtune.sweep.store.connected import TrialReader
from ddtune.sweep.store.records import trial_record

FINISHED = ("done", "failed")


class Finished:
    """The finished prefix of one sweep's trials, kept between calls (module docstring)."""

    def __init__(self, store: TrialReader, sweep_id: int) -> None:
        self.store, self.sweep_id = store, sweep_id
        self.records: list[TrialRecord] = []  # the finished prefix, in run order

    def update(self) -> list[TrialRecord] | None:
        """The trials finished since the last call; None when the prefix changed."""
        rows = self.store.trials(self.sweep_id)
        held = [(r.trial_id, r.status) for r in self.records]
        if [(row["id"], row["status"]) for row in rows[: len(held)]] != held:
            self.records = []
            self.update()
            return None
        new = []
        for row in rows[len(held) :]:
            if row["status"] not in FINISHED:
                break
            new.append(trial_record(self.store, row))
        self.records += new
        return new


__all__ = ["FINISHED", "Finished"]
