"""A request-interleaved pass (`[sweep] interleave = "request"`): a pass's trials benched in turns.

    statuses = run_interleaved_pass(loop, controller, trials, phase)

On a shared machine the CPU runs faster or slower from one second to the
next, so a pass that benches its configs one after another gives each config
its own few seconds of machine; the comparison between two configs carries
the difference. Alternating requests between the configs spreads every
config over the whole pass instead (measured on the demo's configs: about
half the variance of a comparison; docs/benchmarks.md "The demo").

1. Per trial, in the pass order: a new attempt and the full readiness protocol
   (`become_ready`: the POST, same instance, new generation, health,
   generations). A trial that is not READY is stored as failed here.
2. The READY trials bench in turns, request by request (`bench.alternate`);
   before each request a checked config switch (`HotController.switch`) and,
   after it, the response's `system_fingerprint` proves the config it ran under.
3. Each trial's result (or failure) is stored as its own attempt.
4. A trial that failed is retried alone, the ordinary way, while attempts are left.

Only the hot controller switches configs between requests; `spec.py` refuses
the key for other services. See docs/architecture.md "Sweep".
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from ddtune.bench.alternate import Arm, run_alternated
from ddtune.sweep.attempt import AttemptReport, Phase, become_ready, note_ready
from ddtune.sweep.views import attempt_dir

if TYPE_CHECKING:
    from ddtune.params import DecodeParams
    from ddtune.services import Controller, Outcome
    from ddtune.services.hot import HotController, Switched
    from ddtune.sweep.runner import TrialLoop


@dataclass
class _Ready:
    trial: sqlite3.Row
    attempt_id: int
    folder: Path
    outcome: Outcome
    seconds: float  # the readiness protocol's wall time


def run_interleaved_pass(
    loop: TrialLoop, controller: Controller, trials: list[sqlite3.Row], phase: Phase
) -> list[str]:
    """Steps 1-4 of the module docstring; each trial's final status (done | failed)."""
    errors: dict[int, str | None] = {}
    ready: list[_Ready] = []
    for trial in trials:  # 1
        attempt_id, number = loop.store.begin_attempt(trial["id"])
        folder = attempt_dir(loop.workdir, trial["id"], trial["label"], trial["repeat"], number)
        started = time.monotonic()
        outcome = become_ready(controller, loop.store.trial_config(trial), folder, phase)
        if outcome.ready:
            note_ready(loop.store, attempt_id, folder, outcome.to_dict())
            ready.append(_Ready(trial, attempt_id, folder, outcome, time.monotonic() - started))
        else:
            report = AttemptReport(outcome.to_dict())
            errors[trial["id"]] = loop.store_attempt(trial, attempt_id, folder, report)
    if ready:
        phase("benchmarking in turns")
        for item, arm in zip(ready, _bench_in_turns(loop, controller, ready), strict=True):  # 2
            seen = item.outcome.to_dict()  # its own seconds: the pass's attempts overlap
            seen["timings"] = {**seen["timings"], "spent_s": item.seconds + arm.seconds}
            report = AttemptReport(
                seen,
                bench=None if arm.result is None else arm.result.to_dict(),
                bench_error=arm.error,
                bench_s=round(arm.seconds, 3),
            )
            errors[item.trial["id"]] = loop.store_attempt(  # 3
                item.trial, item.attempt_id, item.folder, report
            )
    return [loop.retry(controller, t, errors[t["id"]], phase) for t in trials]  # 4


def _bench_in_turns(loop: TrialLoop, controller: Controller, ready: list[_Ready]) -> list[Arm]:
    from ddtune.services.hot import HotController

    if not isinstance(controller, HotController):
        raise TypeError("request-interleaved passes need the hot controller (service kind 'hot')")
    with _switches(controller, [r.outcome for r in ready]) as switch_to:
        arms = [Arm(switch_to(loop.store.trial_config(r.trial).params)) for r in ready]
        base_url = ready[0].outcome.base_url
        return run_alternated(base_url, loop.spec.bench, loop.spec.service.profile, arms)


@contextmanager
def _switches(
    controller: HotController, outcomes: list[Outcome]
) -> Iterator[Callable[[DecodeParams], Callable[[], str]]]:
    """`switch_to(params)`: a function that switches the server to `params`, checked."""
    from ddtune.services.hot import Switched

    newest = max(outcomes, key=lambda o: int((o.identity or {}).get("config_generation") or 0))
    last: list[Switched] = [Switched.from_identity(newest.identity or {})]
    with httpx.Client(timeout=controller.spec.timeouts.request, trust_env=False) as client:

        def switch_to(params: DecodeParams) -> Callable[[], str]:
            def switch() -> str:
                last[0] = controller.switch(client, params, last[0])
                return last[0].fingerprint

            return switch

        yield switch_to


__all__ = ["run_interleaved_pass"]
