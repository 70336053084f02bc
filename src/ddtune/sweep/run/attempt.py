"""One attempt of one trial: the slot's half, reconfigure → READY → bench, and its typed report.

    report = execute_attempt(controller, bench, engine, config, attempt_dir, phase, on_ready)

It runs next to the service (in this process for the local backend, inside the
slot's Ray actor for the ray backend): `controller.reconfigure(...)` (the full
readiness protocol) → READY → `run_bench(...)`. Nothing is stored here: the
`AttemptReport` (the controller's `Outcome`, the bench's `BenchResult`) goes
to the driver's `AttemptPolicy` (`policy.py`), the only writer of the store.
See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddtune.services.outcome import Outcome

if TYPE_CHECKING:
    from ddtune.bench.matrix import BenchMatrix
    from ddtune.bench.result import BenchResult
    from ddtune.services import Controller
    from ddtune.sweep.spec.parse import Config

Phase = Callable[[str], None]  # shows a text in the progress line
PHASE_TEXT = {  # the controller's phase (ddtune.services.protocol.PHASES) → the progress line
    "render": "rendering the launch",
    "snapshot": "snapshot of the running instance",
    "stop": "stopping",
    "quiesce": "quiescing",
    "start": "starting",
    "poll": "loading (waiting for READY)",
}


@dataclass
class AttemptReport:
    """What one attempt produced, typed; it travels from a Ray actor as it is."""

    outcome: Outcome  # the readiness protocol's
    bench: BenchResult | None = None  # when the bench ran
    bench_error: str | None = None  # "Type: message" when the bench raised
    bench_s: float | None = None
    hardware: dict[str, Any] = field(default_factory=dict)  # of the machine that ran it
    slot: str | None = None  # the slot that ran it (ray backend)
    node: str | None = None  # that slot's node address

    @classmethod
    def failed(cls, failure: str, detail: str, slot: str | None = None) -> AttemptReport:
        """An attempt that ended before the readiness protocol could say why."""
        return cls(Outcome(ready=False, failure=failure, detail=detail), slot=slot)

    def error(self) -> str | None:
        """`class — detail` of a failed attempt; None when READY and benched."""
        outcome = self.outcome
        if not outcome.ready:
            detail = outcome.detail or "the controller gave no detail"
            return f"{outcome.failure or 'not_ready'} — {detail}"
        if self.bench is None:
            return f"bench_error — {self.bench_error or 'the bench gave no result'}"
        return None

    def blocked(self) -> str | None:
        """`class — detail` when the port is held by a process ddtune never stops."""
        outcome = self.outcome
        if outcome.ready or not outcome.port_holders:
            return None
        return f"{outcome.failure or 'not_ready'} — {outcome.detail}"


def execute_attempt(
    controller: Controller,
    bench: BenchMatrix,
    engine: str,
    config: Config,
    attempt_dir: Path,
    phase: Phase,
    on_ready: Callable[[Outcome], None] | None = None,
    reuse: Outcome | None = None,
) -> AttemptReport:
    """reconfigure → READY → bench; `on_ready(outcome)` runs between the two.

    `reuse`: a READY outcome of the same config still serving (`passes_per_start`);
    the bench runs against it without a restart, its timings say `reused_start`.
    """
    outcome = become_ready(controller, config, attempt_dir, phase, reuse)
    report = AttemptReport(outcome)
    if not outcome.ready:
        return report
    if on_ready is not None:
        on_ready(outcome)
    phase("benchmarking")
    return _bench(report, outcome.base_url, bench, engine)


def become_ready(
    controller: Controller,
    config: Config,
    attempt_dir: Path,
    phase: Phase,
    reuse: Outcome | None = None,
) -> Outcome:
    """The readiness protocol for `config` (or `reuse`'s READY outcome); never raises."""
    phase("reconfiguring")
    attempt_dir.mkdir(parents=True, exist_ok=True)
    if reuse is not None:
        return replace(reuse, timings={"reused_start": 1.0})
    return controller.reconfigure(
        config.params,
        attempt_dir,
        user_vars=config.user_vars(),
        on_phase=lambda name: phase(PHASE_TEXT.get(name, name)),
    )


def _bench(report: AttemptReport, base_url: str, bench: BenchMatrix, engine: str) -> AttemptReport:
    from ddtune.bench import run_bench

    started = time.monotonic()
    try:
        result = run_bench(
            base_url,
            bench,
            engine=engine,
            identity=None,  # bench snapshots what serves now; the store merges both views
            progress=False,  # the sweep's own progress line is live
        )
    except Exception as exc:  # a server dying mid-bench must not stop the sweep
        report.bench_error = f"{type(exc).__name__}: {exc}"
        return report
    report.bench = result
    report.bench_s = round(time.monotonic() - started, 3)
    return report


__all__ = ["PHASE_TEXT", "AttemptReport", "Phase", "become_ready", "execute_attempt"]
