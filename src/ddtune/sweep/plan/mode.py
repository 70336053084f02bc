"""Restart-bound or not: how a race runs, chosen once from the spec and the costs.

    mode = choose_mode(spec, trial_costs(spec, store))   # a SweepMode, with its reason

`[sweep] restart_bound = true / false` pins it. Strategy "predict" is always
restart-bound (at T > 0 it cannot predict, and races like strategy "race"). Left at "auto" (the default),
a race is restart-bound when a restart (stop + start to READY) takes at least
as long as one bench: the trial is then mostly restart, and deciding start by
start (`starts.py`) spends them where they buy information. Not restart-bound:
a hot service (a reconfigure in place is no restart), configs taking turns by
request, the Ray backend (a start is reused in this process only), or no costs
known. `benchmarks/restart_bound.py` measured the restart-bound race ahead of
the pass-by-pass race down to a restart of 1/10 of a bench on the production landscape,
so the threshold keeps today's behaviour wherever a bench dominates.
The mode is stored with the sweep when it is created (`store/modes.py`).
"""

from __future__ import annotations

import dataclasses

from ddtune.sweep.plan.estimate import TrialCosts
from ddtune.sweep.spec.load import SweepSpec
from ddtune.sweep.store.modes import SweepMode


def choose_mode(spec: SweepSpec, costs: TrialCosts | None) -> SweepMode:
    """The mode a new sweep of `spec` runs in, and why."""
    setting = spec.restart_bound.setting
    start_s, bench_s = (costs.start_s, costs.bench_s) if costs is not None else (None, None)
    if spec.predicting:
        why = (
            "strategy predict: the trace chooses which configs start, a restart-bound race confirms"
        )
        return SweepMode(True, why, start_s, bench_s, spec.restart_bound.most_benches)
    if not spec.races:
        return SweepMode(False, f"strategy {spec.strategy}")
    if setting is not True:
        off = _why_not(spec, costs, setting)
        if off is not None:
            return SweepMode(False, off, start_s, bench_s)
    why = (
        "[sweep] restart_bound = true"
        if setting is True
        else f"auto: a restart ({_s(start_s)}) takes at least one bench ({_s(bench_s)})"
    )
    return SweepMode(True, why, start_s, bench_s, spec.restart_bound.most_benches)


def _why_not(spec: SweepSpec, costs: TrialCosts | None, setting: object) -> str | None:
    """Why "auto" (or false) keeps the pass-by-pass race; None when auto picks restart-bound."""
    if setting is False:
        return "[sweep] restart_bound = false"
    if spec.service.control == "hot":
        return "auto: a hot reconfigure in place is not a restart"
    if spec.interleave == "request":
        return "auto: configs take turns request by request on one server"
    if spec.cluster.backend != "local":
        return "auto: the ray backend does not reuse a start"
    if costs is None:
        return "auto: no costs known (set [service] expected_start_s and expected_bench_s)"
    if costs.start_s < costs.bench_s:
        return (
            f"auto: a restart ({_s(costs.start_s)}) takes less than a bench ({_s(costs.bench_s)})"
        )
    return None


def run_spec(spec: SweepSpec, mode: SweepMode) -> SweepSpec:
    """The spec a sweep runs with: restart-bound, one start serves up to `most_benches`."""
    if not mode.restart_bound:
        return spec
    return dataclasses.replace(spec, passes_per_start=mode.most_benches)


def _s(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds:.0f} s"


__all__ = ["choose_mode", "run_spec"]
