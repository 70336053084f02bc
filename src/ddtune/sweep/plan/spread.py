"""How much one server start moves a config's level on this service: stated, else measured
from the store's earlier sweeps, else the restart-bound race's prior.

    spread = measured_spread(store, objective)   # None: no earlier sweep started a config twice
    chosen_spread(spec.restart_bound.start_spread, spread)   # the one a sweep takes, and why

Every earlier sweep in the store whose configs started two or more times (a grid's
passes, a race's second starts) is read as the restart-bound race reads its own
benches: a trial whose attempt restarted the server opens a start of its config, a
bench on a start already serving joins it. The between-start log-sd is estimated per
sweep with the race's own model (`stats.mixed`: bench noise, start, drift in time),
without a start prior, pooled over the sweeps by their degrees of freedom, and moderated
by the race's 3% start prior (its 4 df): one repeated start cannot say "no spread at all".
`prepare` fixes it with a new restart-bound sweep (`store/modes.py`), so a resumed
race keeps the spread it started with. docs/sweeps.md "Restart-bound races".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from ddtune.records import TrialRecord
from ddtune.stats.mixed import (
    Components,
    StartMean,
    VariancePrior,
    estimate_components,
    start_means,
)
from ddtune.sweep.plan.passes import objective_value
from ddtune.sweep.plan.races.by_start import PRIORS
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.modes import StartSpread, trial_times

# The start component is estimated from the data alone (no prior's pull); a bench's noise
# and the drift keep the race's priors (a grid's starts hold one bench each).
_UNPRIORED = replace(PRIORS, start=VariancePrior(PRIORS.start.sd, 0.0))


def measured_spread(store: Store, objective: str) -> StartSpread | None:
    """The pooled between-start log-sd of `store`'s sweeps (module docstring); None where no
    config of any of them was measured on two starts."""
    weighted, df, used = 0.0, 0.0, []
    for sweep_id, name in zip(store.sweep_ids(), store.sweep_names(), strict=True):
        found = sweep_components(store, sweep_id, objective)
        if found is None:
            continue
        start = found[0].start
        weighted, df = weighted + start.var * start.df, df + start.df
        used.append(name)
    if df <= 0:
        return None
    prior = PRIORS.start  # a few repeated starts move it a little, a grid's passes decide it
    var = (prior.df * prior.sd**2 + weighted) / (prior.df + df)
    source = (
        f"measured: {df:.0f} repeated start(s) in sweep(s) {', '.join(used)} of {store.path}, "
        f"with the {prior.sd:.0%} prior worth {prior.df:.0f}"
    )
    return StartSpread(math.sqrt(var), source)


def sweep_components(
    store: Store, sweep_id: int, objective: str
) -> tuple[Components, list[StartMean]] | None:
    """One sweep's spreads by the race's model (a bench, a start without the start prior, the
    drift), with its starts in time order per config; None where no config started twice."""
    means, logs = _starts(store, sweep_id, objective)
    if len(means) <= len({m.label for m in means}):
        return None
    return estimate_components(means, logs, _UNPRIORED), means


def chosen_spread(stated: float | None, measured: StartSpread | None) -> StartSpread:
    """The spread a sweep takes, with where it came from: `[sweep] start_spread` where the spec
    states it, else `measured` (the store's earlier sweeps), else the race's prior. The race's
    priors, the round-cost model and the words `sweep plan` prints all take it from here."""
    if stated is not None:
        return StartSpread(stated, "stated: [sweep] start_spread")
    if measured is not None:
        return measured
    return StartSpread(
        PRIORS.start.sd,
        "assumed until second starts measure it; on a noisier host set [sweep] start_spread, "
        "or run in the store of an earlier sweep of this service",
    )


def config_starts(
    store: Store, sweep_id: int, keep: Callable[[TrialRecord], bool], since: float | None = None
) -> list[tuple[str, list[tuple[TrialRecord, float]]]]:
    """Each config's starts in sweep `sweep_id`, of the ended trials `keep` takes, in time order
    per config, each bench with when it ended (`trial_times`: hours from `since`, default the
    sweep's creation): a trial whose attempt restarted the server opens a start."""
    times = trial_times(store, sweep_id, since)
    runs: dict[str, list[tuple[float, bool, TrialRecord]]] = {}
    for record in store.trial_records(sweep_id):
        if record.trial_id in times and keep(record):
            hours, fresh = times[record.trial_id]
            runs.setdefault(record.label, []).append((hours, fresh, record))
    starts: list[tuple[str, list[tuple[TrialRecord, float]]]] = []
    for label, ran in runs.items():
        for hours, fresh, record in sorted(ran, key=lambda run: run[:2]):
            if fresh or not starts or starts[-1][0] != label:
                starts.append((label, []))
            starts[-1][1].append((record, hours))
    return starts


def _starts(
    store: Store, sweep_id: int, objective: str
) -> tuple[list[StartMean], list[list[float]]]:
    """One sweep's starts, in time order per config, of its benches with a value."""
    logs: dict[int, float] = {}

    def valued(record: TrialRecord) -> bool:
        value = objective_value(record, objective)
        if value is not None:
            logs[record.trial_id] = math.log(value)
        return value is not None

    starts = config_starts(store, sweep_id, valued)
    return start_means((x, [(logs[r.trial_id], h) for r, h in runs]) for x, runs in starts)


__all__ = ["chosen_spread", "config_starts", "measured_spread", "sweep_components"]
