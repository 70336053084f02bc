"""The live progress of a distributed sweep: one bar for the sweep, one line per slot.

    with SlotProgress(console, total) as view:
        view.show("gpu0", "loading (waiting for READY)", trial_row)
        view.advance("gpu0")    # a trial finished there (done or failed)

See docs/sweeps.md "Scale out".
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from ddtune.sweep.store.rows import TrialRow


class SlotProgress:
    def __init__(self, console: Console, total: int) -> None:
        self.progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[trial]}", markup=False),
            TextColumn("{task.fields[phase]}", style="cyan", markup=False),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.sweep = self.progress.add_task("sweep", total=total, trial="", phase="")
        self.rows: dict[str, TaskID] = {}

    def __enter__(self) -> SlotProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def show(self, slot: str, phase: str, trial: TrialRow | None = None) -> None:
        """Slot `slot` is in `phase`, on `trial` (None: between trials)."""
        name = "" if trial is None else f"{trial['id']} {trial['label']} r{trial['repeat']}"
        if slot not in self.rows:
            self.rows[slot] = self.progress.add_task(
                f"  slot {slot}", total=None, trial=name, phase=phase
            )
        self.progress.update(self.rows[slot], trial=name, phase=phase)

    def advance(self, slot: str | None = None) -> None:
        """One trial finished (done or failed), on `slot` when it ran there."""
        self.progress.advance(self.sweep)
        if slot in self.rows:
            self.progress.advance(self.rows[slot])


__all__ = ["SlotProgress"]
