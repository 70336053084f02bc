"""The driver of a distributed sweep: trials handed to a pool of service slots.

    SlotLoop(spec, store, workdir, console, summary).run(todo)

The driver plans nothing itself (the runner gives it the trials to run, in
order) and is the only writer of the store: every attempt goes through the one
`AttemptPolicy` (`run/policy.py`: retry on the same slot, a held port, the
breaker, whose control start goes to the next idle slot). Each slot runs one
attempt at a time, next to its service (`slot.py`, in a Ray actor: `pool.py`),
and puts the service back as it found it at the end (`SlotRunner.close`).
Scheduling (`by_pass`, `by_trial`), a lost slot (`node_lost`, requeued, the
slot retired until it rejoins), `min_slots`, Ctrl-C: see docs/sweeps.md "Scale out".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import Console
from rich.markup import escape

import ddtune.sweep.store.slot_tables as slot_store
from ddtune.errors import UserError
from ddtune.services.outcome import Outcome
from ddtune.services.session import signals_ignored
from ddtune.sweep.run.attempt import AttemptReport
from ddtune.sweep.run.common import RunSummary, SweepBlocked, stopping
from ddtune.sweep.run.policy import AttemptPolicy
from ddtune.sweep.run.ray.slot import AttemptTask, Event, Finished, Lost, Progress, SlotInfo
from ddtune.sweep.run.ray.view import SlotProgress
from ddtune.sweep.store.files import attempt_dir
from ddtune.sweep.store.rows import TrialRow

if TYPE_CHECKING:
    from ddtune.bench.matrix import BenchMatrix
    from ddtune.sweep.spec.parse import Config, SweepSpec
    from ddtune.sweep.store.db import Store

POLL_S = 0.5  # longest wait for an event before the loop looks around again
REJOIN_EVERY_S = 5.0  # how often retired slots are offered to the pool again


class SlotPool(Protocol):
    """Where slots live (Ray actors, or threads in tests)."""

    def start(self) -> tuple[dict[str, SlotInfo], dict[str, str]]:
        """Start every slot: (live slots, {slot: why it did not start})."""

    def submit(self, slot: str, task: AttemptTask) -> None: ...

    def poll(self, timeout: float) -> list[Event]: ...

    def rejoin(self, retired: list[str]) -> dict[str, SlotInfo]:
        """Offer retired slots to the pool again; those now live."""

    def close(self) -> list[str]:
        """Close every slot's controller (nothing left running), then the pool."""


@dataclass
class InFlight:
    trial: TrialRow | None  # None: the breaker's control start of the baseline
    attempt_id: int
    attempt_dir: Path
    noted: bool = False  # READY outcome stored
    known: Outcome | None = None  # what the slot reported so far
    phase: str = "submitted"


@dataclass
class SlotState:
    info: SlotInfo
    state: str = "idle"  # schema.SLOT_STATES
    task: InFlight | None = None
    retry: tuple[TrialRow, float] | None = None  # (trial, not before) after a failure
    done: int = 0


class SlotLoop:
    """Runs a list of trials on a pool of slots; see the module docstring."""

    def __init__(
        self,
        spec: SweepSpec,
        store: Store,
        workdir: Path,
        console: Console,
        summary: RunSummary,
        pool_factory: Callable[[SweepSpec, Path, str], SlotPool] | None = None,
    ) -> None:
        self.spec, self.store, self.console, self.summary = spec, store, console, summary
        self.root = Path(spec.cluster.table.workdir or workdir)
        self.workdir = workdir
        self.pool_factory = pool_factory or _ray_pool
        self.slots: dict[str, SlotState] = {}
        self.queue: list[TrialRow] = []
        self.owners: dict[int, str] = {}  # pass (repeat) → the slot running it (by_pass)
        self.used: dict[int, int] = {}  # trial id → attempts counted against retry.attempts
        self.lost: dict[int, int] = {}  # trial id → attempts lost with their slot
        self.view: SlotProgress | None = None
        self.policy = AttemptPolicy(spec, store, console, summary)
        self.control: Config | None = None  # the breaker's control start, due on an idle slot
        self.bench_for: Callable[[TrialRow, BenchMatrix], BenchMatrix] = lambda _, m: m

    # --- the loop ------------------------------------------------------------------

    def run(self, todo: list[TrialRow], more: Callable[[], list[TrialRow]] | None = None) -> None:
        """`todo`, then each batch the strategy's `more()` returns, until []."""
        batch = todo or (more() if more else [])
        while batch and not self.summary.stopped:
            self._run_batch(batch)
            batch = more() if more else []
        self.policy.end_streak()

    def _run_batch(self, todo: list[TrialRow]) -> None:
        self.queue = list(todo)
        pool = self.pool_factory(self.spec, self.root, str(self.store.path.resolve()))
        try:
            stop = stopping(self.summary, self._interrupt_in_flight)
            with stop, SlotProgress(self.console, len(todo)) as self.view:
                self._start(pool)
                self._loop(pool)
        except UserError:
            self._interrupt_in_flight()
            raise
        finally:
            with signals_ignored():
                self._close(pool)

    def _start(self, pool: SlotPool) -> None:
        for slot in self.spec.cluster.slots:
            self._set(slot.name, state="starting", detail=None)
        live, failed = pool.start()
        for name, why in failed.items():
            self._set(name, state="retired", detail=why)
            self.console.print(f"[red]slot {escape(name)} did not start[/]: {escape(why)}")
        for name, info in live.items():
            self._join(name, info)
        self._check_min_slots(failed)

    def _loop(self, pool: SlotPool) -> None:
        next_rejoin = time.monotonic() + REJOIN_EVERY_S
        while self.queue or self.control or any(s.task or s.retry for s in self.slots.values()):
            for name in sorted(self.slots):
                self._dispatch(pool, name)
            for event in pool.poll(POLL_S):
                self._handle(event)
            if time.monotonic() >= next_rejoin:
                retired = [n for n, s in self.slots.items() if s.state == "retired"]
                for name, info in pool.rejoin(retired).items() if retired else ():
                    self._join(name, info)
                next_rejoin = time.monotonic() + REJOIN_EVERY_S

    def _join(self, name: str, info: SlotInfo) -> None:
        state = self.slots.get(name)
        if state is not None:
            self.console.print(f"slot {escape(name)} rejoined on {info.node}")
            state.info, state.state = info, "idle"
        else:
            self.slots[name] = SlotState(info)
        for note in info.notes:
            self.console.print(f"[yellow]{escape(note)}[/]")
        self._set(
            name, "idle", state="idle", node=info.node, pid=info.pid, detail=None, trial_id=None
        )

    # --- handing out trials ----------------------------------------------------------

    def _dispatch(self, pool: SlotPool, name: str) -> None:
        slot = self.slots[name]
        if slot.state not in ("idle", "backoff") or slot.task is not None:
            return
        if self.control is not None:
            self._submit(pool, name, None)
            return
        if slot.retry is not None:
            trial, not_before = slot.retry
            if time.monotonic() < not_before:
                return
            slot.retry = None
        else:
            picked = self._pick(name)
            if picked is None:
                return
            trial = picked
        self._submit(pool, name, trial)

    def _pick(self, name: str) -> TrialRow | None:
        """The next trial for slot `name`, or None (it waits)."""
        if self.spec.cluster.table.schedule == "by_trial":
            return self.queue.pop(0) if self.queue else None
        for preferred in (True, False):
            for index, trial in enumerate(self.queue):
                owner = self.owners.get(trial["repeat"])
                if (owner == name) if preferred else owner is None:
                    self.owners[trial["repeat"]] = name
                    return self.queue.pop(index)
        return None

    def _submit(self, pool: SlotPool, name: str, trial: TrialRow | None) -> None:
        """An attempt of `trial` on slot `name`; None: the breaker's control, the baseline
        started (READY or not)."""
        slot = self.slots[name]
        if trial is None:
            config, self.control = self.control, None
            assert config is not None
            path = Path("control") / f"after-{len(self.queue)}-left-{int(time.time())}"
            task = AttemptTask(
                0, 0, 1, config.label(), 0, config.to_wire(), str(path), control=True
            )
            phase = "control start of the baseline"
        else:
            attempt_id, number = self.store.begin_attempt(trial["id"])
            slot_store.record_attempt_slot(self.store, attempt_id, name, slot.info.node)
            path = attempt_dir(Path(), trial["id"], trial["label"], trial["repeat"], number)
            task = AttemptTask(
                trial["id"],
                attempt_id,
                number,
                trial["label"],
                trial["repeat"],
                self.store.trial_config(trial).to_wire(),
                str(path),
                bench=_bench_change(self.bench_for(trial, self.spec.bench), self.spec.bench),
            )
            phase = "submitted"
        slot.task, slot.state = InFlight(trial, task.attempt_id, self.workdir / path), "busy"
        trial_id = None if trial is None else trial["id"]
        self._set(name, phase, trial, state="busy", trial_id=trial_id, phase=phase)
        pool.submit(name, task)

    # --- what comes back ---------------------------------------------------------------

    def _handle(self, event: Event) -> None:
        slot = self.slots.get(event.slot)
        if slot is None or slot.task is None:
            return
        if isinstance(event, Progress):
            self._progress(event.slot, slot.task, event)
        elif isinstance(event, Finished):
            self._finished(event.slot, slot, event.report)
        else:
            self._lost(event.slot, slot, event.detail)

    def _progress(self, name: str, task: InFlight, event: Progress) -> None:
        if event.ready is not None and task.trial is not None and not task.noted:
            self.policy.note_ready(task.attempt_id, task.attempt_dir, event.ready)
            task.noted, task.known = True, event.ready
        if event.phase != task.phase:
            task.phase = event.phase
            self._set(name, event.phase, task.trial, phase=event.phase)

    def _finished(self, name: str, slot: SlotState, report: AttemptReport) -> None:
        task, slot.task, slot.state = slot.task, None, "idle"
        assert task is not None
        if task.trial is None:  # the breaker's control: READY clears it, else ServiceBroken
            self._set(name, state="idle", trial_id=None, phase=None)
            self.policy.control_result(report.outcome)
            return
        trial = task.trial
        try:
            error = self.policy.settle(trial, task.attempt_id, task.attempt_dir, report)
        except SweepBlocked:  # retries cannot help: stop as the local backend does
            self.store.finish_trial(trial["id"], "interrupted")
            raise
        used = self.used[trial["id"]] = self.used.get(trial["id"], 0) + 1
        if error is None:
            slot.done += 1
            self._count(trial, "done", name)
        elif (wait := self.policy.after(trial, used, error)) is not None:
            slot.retry, slot.state = (trial, time.monotonic() + wait), "backoff"
        else:
            self._count(trial, "failed", name)
        self._set(name, slot.state, state=slot.state, trial_id=None, phase=None, done=slot.done)

    def _lost(self, name: str, slot: SlotState, detail: str) -> None:
        """The slot died mid-attempt: store what is known, requeue, retire the slot."""
        task, slot.task, slot.state = slot.task, None, "retired"
        assert task is not None
        line = f"slot {name} ({slot.info.node}) lost during '{task.phase}': {detail}"
        trial = task.trial
        if trial is None:  # the control start: another slot starts it
            self.console.print(f"[red]{escape(line)}[/]; the control start goes to another slot")
            self.control = self.spec.baseline
        else:
            known = task.known or Outcome(False)
            self.store.fail_attempt(
                task.attempt_id,
                "node_lost",
                line,
                timings=known.timings,
                identity=known.identity,
                hardware=slot.info.hardware,
            )
            self.console.print(f"[red]{escape(line)}[/]; trial {trial['id']} goes to another slot")
            lost = self.lost[trial["id"]] = self.lost.get(trial["id"], 0) + 1
            self._requeue(trial, lost)
        if slot.retry is not None:
            self._requeue(slot.retry[0], 0)
            slot.retry = None
        self.owners = {p: s for p, s in self.owners.items() if s != name}
        self._set(name, "retired", state="retired", trial_id=None, phase=None, detail=line)
        self._check_min_slots({name: line})

    def _requeue(self, trial: TrialRow, lost: int) -> None:
        if lost > len(self.spec.cluster.slots):
            self.store.finish_trial(trial["id"], "failed")
            self._count(trial, "failed")
            return
        self.queue.append(trial)
        self.queue.sort(key=lambda t: t["order_index"])

    # --- bookkeeping ---------------------------------------------------------------------

    def _check_min_slots(self, why: dict[str, str]) -> None:
        live = [n for n, s in self.slots.items() if s.state != "retired"]
        need = self.spec.cluster.table.min_slots
        if len(live) < need:
            reasons = "; ".join(f"{n}: {w}" for n, w in why.items())
            raise UserError(
                f"only {len(live)} live slot(s), fewer than cluster.min_slots = {need} "
                f"({reasons}); the sweep stopped, finished trials are kept: run it again to resume",
                key="cluster.min_slots",
            )

    def _count(self, trial: TrialRow, status: str, slot: str | None = None) -> None:
        """Counted by the policy; at the breaker's threshold a control start is due."""
        if self.view is not None:
            self.view.advance(slot)
        if self.policy.finished(trial, status):
            self.control = self.policy.control_start()

    def _interrupt_in_flight(self) -> None:
        for slot in self.slots.values():
            if slot.task is not None and slot.task.trial is not None:
                self.store.finish_trial(slot.task.trial["id"], "interrupted")
            if slot.retry is not None:
                self.store.finish_trial(slot.retry[0]["id"], "interrupted")

    def _close(self, pool: SlotPool) -> None:
        for note in pool.close():
            self.console.print(f"[yellow]{escape(note)}[/]")
        for name in {s.name for s in self.spec.cluster.slots} | set(self.slots):
            self._set(name, state="stopped", trial_id=None, phase=None)

    def _set(
        self, name: str, shown: str | None = None, trial: TrialRow | None = None, **fields: Any
    ) -> None:
        """The slot's row in the store (`fields`); `shown`: its phase in the progress view."""
        slot_store.set_slot(self.store, self.summary.sweep_id, name, **fields)
        if shown is not None and self.view is not None:
            self.view.show(name, shown, trial)


def _ray_pool(spec: SweepSpec, root: Path, store: str) -> SlotPool:
    from ddtune.sweep.run.ray.pool import RayPool

    return RayPool(spec, root, store)


def _bench_change(matrix: BenchMatrix, written: BenchMatrix) -> dict[str, Any] | None:
    """The bench a task runs when the strategy changed it (None: the slot's own `[bench]`)."""
    return None if matrix == written else matrix.to_dict()


__all__ = ["Event", "Finished", "Lost", "Progress", "SlotLoop", "SlotPool"]
