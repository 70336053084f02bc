"""One attempt of one trial, split into what a slot executes and what the driver stores.

    report = execute_attempt(controller, bench, engine, config, attempt_dir, phase, on_ready)
        the slot's half, run next to the service (in this process for the local
        backend, inside the slot's Ray actor for the ray backend):
        `controller.reconfigure(...)` (the full readiness protocol) → READY →
        `run_bench(...)`; nothing is stored, everything comes back as plain data
    failure = store_report(store, trial_id, attempt_id, attempt_dir, report)
        the driver's half: the log tail next to the attempt, then the attempt
        failed (class, detail, timings, identity) or samples + results + done

The driver is the only writer of the store. See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ddtune.bench.matrix import BenchMatrix
    from ddtune.services import Controller, Outcome
    from ddtune.sweep.spec.parse import Config
    from ddtune.sweep.store.db import Store

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
    """What one attempt produced; plain data, so it can travel from a Ray actor."""

    outcome: dict[str, Any]  # `Outcome.to_dict()`
    bench: dict[str, Any] | None = None  # `BenchResult.to_dict()` when the bench ran
    bench_error: str | None = None  # "Type: message" when the bench raised
    bench_s: float | None = None
    hardware: dict[str, Any] = field(default_factory=dict)  # of the machine that ran it
    slot: str | None = None  # the slot that ran it (ray backend)
    node: str | None = None  # that slot's node address


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
    report = AttemptReport(outcome.to_dict())
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
    report.bench = result.to_dict()
    report.bench_s = round(time.monotonic() - started, 3)
    return report


def write_tail(attempt_dir: Path, outcome: dict[str, Any]) -> str | None:
    """Keep the controller's log tail next to the attempt; return its path."""
    if outcome.get("log_tail"):
        attempt_dir.mkdir(parents=True, exist_ok=True)
        path = attempt_dir / "log_tail.txt"
        path.write_text(outcome["log_tail"])
        return str(path)
    return outcome.get("log_path") or None


def note_ready(store: Store, attempt_id: int, attempt_dir: Path, outcome: dict[str, Any]) -> None:
    """A READY attempt's timings, identity and log path, saved before its bench."""
    tail_path = write_tail(attempt_dir, outcome)
    seen = {"timings": outcome.get("timings") or {}, "identity": outcome.get("identity") or {}}
    store.note_attempt(attempt_id, **seen, log_tail_path=tail_path)


def store_report(
    store: Store,
    trial_id: int,
    attempt_id: int,
    attempt_dir: Path,
    report: AttemptReport,
    hardware: dict[str, Any],
) -> str | None:
    """Store the attempt's outcome; returns its failure line, or None when the trial is done."""
    outcome = report.outcome
    tail_path = write_tail(attempt_dir, outcome)
    timings, identity = dict(outcome.get("timings") or {}), dict(outcome.get("identity") or {})
    seen: dict[str, Any] = {"timings": timings, "identity": identity, "log_tail_path": tail_path}
    if report.hardware:
        seen["hardware"] = report.hardware
    if not outcome.get("ready"):
        failure = outcome.get("failure") or "not_ready"
        detail = outcome.get("detail") or "the controller gave no detail"
        store.fail_attempt(attempt_id, failure, detail, **seen)
        return f"{failure} — {detail} (log: {tail_path})"
    if report.bench is None:
        detail = report.bench_error or "the bench gave no result"
        store.fail_attempt(attempt_id, "bench_error", detail, **seen)
        return f"bench_error — {detail} (log: {tail_path})"
    timings["bench_s"] = report.bench_s or 0.0
    seen["hardware"] = report.bench.get("hardware") or report.hardware or hardware
    store.record_result(trial_id, attempt_id, report.bench, **seen)
    return None


__all__ = [
    "PHASE_TEXT",
    "AttemptReport",
    "become_ready",
    "execute_attempt",
    "note_ready",
    "store_report",
    "write_tail",
]
