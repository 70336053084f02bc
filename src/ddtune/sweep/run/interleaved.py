"""A request-interleaved pass (`[sweep] interleave = "request"`): a pass's trials benched in turns.

    errors = run_interleaved_pass(policy, workdir, controller, trials, phase)

On a shared machine the CPU speed drifts from second to second: configs in turns
share the whole pass instead of each its own few seconds (a trial off by 2.3-4.8%
against 9.7% back to back the same hour; docs/benchmarks.md "The demo").

1. Per trial, in the pass order: a new attempt and the full readiness protocol
   (`become_ready`: the POST, same instance, new generation, health,
   generations). A trial that is not READY is stored as failed here, and so is
   one READY on a server that a later trial's failure stopped.
2. The READY trials bench in turns, request by request (`bench.alternate`);
   before each request a checked config switch (`HotController.switch`) and,
   after it, the response's `system_fingerprint` proves the config it ran under.
3. Each trial's result (or failure) is stored as its own attempt.
4. A trial that failed is retried alone, the ordinary way, while attempts are left (by
   the loop: `errors` holds each trial's first failure, or None).

Only the hot controller switches configs between requests; `spec/checks.py` refuses
the key for other services. See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from ddtune.bench.alternate import Arm, run_alternated
from ddtune.services.outcome import Outcome
from ddtune.sweep.run.attempt import AttemptReport, Phase, become_ready
from ddtune.sweep.run.policy import AttemptPolicy
from ddtune.sweep.store.files import attempt_dir
from ddtune.sweep.store.rows import TrialRow

if TYPE_CHECKING:
    from ddtune.params import DecodeParams
    from ddtune.services import Controller
    from ddtune.services.controllers.hot import HotController, Switched


@dataclass
class _Ready:
    trial: TrialRow
    attempt_id: int
    folder: Path
    outcome: Outcome
    seconds: float  # the readiness protocol's wall time


def run_interleaved_pass(
    policy: AttemptPolicy,
    workdir: Path,
    controller: Controller,
    trials: list[TrialRow],
    phase: Phase,
) -> list[str | None]:
    """Steps 1-3 of the module docstring; each trial's first failure (None: done)."""
    from ddtune.services.controllers.hot import HotController, Switched

    if not isinstance(controller, HotController):
        raise TypeError(
            "request-interleaved passes need the hot controller (service control 'hot')"
        )
    errors: dict[int, str | None] = {}  # trial id -> its first attempt's failure line, or None
    ready = _make_ready(policy, workdir, controller, trials, phase, errors)  # 1
    serving = controller.serving()  # a failed trial's cleanup may have stopped the server
    ready = _drop_stale(policy, ready, serving, errors)
    if ready:
        phase("benchmarking in turns")
        arms = _bench_in_turns(policy, controller, ready, Switched.from_identity(serving))  # 2
        for item, arm in zip(ready, arms, strict=True):  # 3
            errors[item.trial["id"]] = _store_turns(policy, item, arm)
    return [errors[t["id"]] for t in trials]


def _make_ready(
    policy: AttemptPolicy,
    workdir: Path,
    controller: HotController,
    trials: list[TrialRow],
    phase: Phase,
    errors: dict[int, str | None],
) -> list[_Ready]:
    """A new attempt and the readiness protocol per trial; the failures stored in `errors`."""
    ready: list[_Ready] = []
    for trial in trials:
        attempt_id, number = policy.store.begin_attempt(trial["id"])
        folder = attempt_dir(workdir, trial["id"], trial["label"], trial["repeat"], number)
        started = time.monotonic()
        outcome = become_ready(controller, policy.store.trial_config(trial), folder, phase)
        if outcome.ready:
            policy.note_ready(attempt_id, folder, outcome)
            ready.append(_Ready(trial, attempt_id, folder, outcome, time.monotonic() - started))
        else:
            errors[trial["id"]] = policy.settle(trial, attempt_id, folder, AttemptReport(outcome))
    return ready


def _drop_stale(
    policy: AttemptPolicy,
    ready: list[_Ready],
    serving: dict[str, Any],
    errors: dict[int, str | None],
) -> list[_Ready]:
    """Trials READY on an instance that no longer serves fail (and are retried alone)."""
    for item in [r for r in ready if _instance(r.outcome) != serving.get("instance_id")]:
        detail = (
            f"READY on instance {_instance(item.outcome)}, which a later trial's failure in "
            f"this pass stopped (now serving: {serving.get('instance_id') or 'nothing'})"
        )
        report = AttemptReport(item.outcome, bench_error=detail)
        errors[item.trial["id"]] = policy.settle(item.trial, item.attempt_id, item.folder, report)
    return [r for r in ready if r.trial["id"] not in errors]


def _store_turns(policy: AttemptPolicy, item: _Ready, arm: Arm) -> str | None:
    """One trial's share of the turns as its attempt; its own seconds, since attempts overlap."""
    timings = {**item.outcome.timings, "spent_s": item.seconds + arm.seconds}
    report = AttemptReport(
        replace(item.outcome, timings=timings),
        bench=arm.result,
        bench_error=arm.error,
        bench_s=round(arm.seconds, 3),
    )
    return policy.settle(item.trial, item.attempt_id, item.folder, report)


def _instance(outcome: Outcome) -> str | None:
    return (outcome.identity or {}).get("instance_id")


def _bench_in_turns(
    policy: AttemptPolicy, controller: HotController, ready: list[_Ready], serving: Switched
) -> list[Arm]:
    """Each arm switches the server to its trial's config (checked) before each request."""
    last: list[Switched] = [serving]
    with httpx.Client(timeout=controller.spec.timeouts.request, trust_env=False) as client:

        def switch_to(params: DecodeParams) -> Callable[[], str]:
            def switch() -> str:
                last[0] = controller.switch(client, params, last[0])
                return last[0].fingerprint

            return switch

        arms = [Arm(switch_to(policy.store.trial_config(r.trial).params)) for r in ready]
        base_url = ready[0].outcome.base_url
        return run_alternated(base_url, policy.spec.bench, policy.spec.service.engine, arms)


__all__ = ["run_interleaved_pass"]
