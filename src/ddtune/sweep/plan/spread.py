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
from dataclasses import replace

from ddtune.stats.mixed import StartMean, VariancePrior, estimate_components, start_means
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
        means, logs = _starts(store, sweep_id, objective)
        if len(means) <= len({m.label for m in means}):  # no config started twice
            continue
        start = estimate_components(means, logs, _UNPRIORED).start
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


def _starts(
    store: Store, sweep_id: int, objective: str
) -> tuple[list[StartMean], list[list[float]]]:
    """One sweep's starts, in time order per config: a restarted trial opens one."""
    times = trial_times(store, sweep_id)
    benches: dict[str, list[tuple[float, bool, float]]] = {}
    for record in store.trial_records(sweep_id):
        value = objective_value(record, objective)
        if value is None or record.trial_id not in times:
            continue
        hours, fresh = times[record.trial_id]
        benches.setdefault(record.label, []).append((hours, fresh, math.log(value)))
    starts: list[tuple[str, list[tuple[float, float]]]] = []
    for label, runs in benches.items():
        for hours, fresh, log in sorted(runs):
            if fresh or not starts or starts[-1][0] != label:
                starts.append((label, []))
            starts[-1][1].append((log, hours))
    return start_means(starts)


__all__ = ["chosen_spread", "measured_spread"]
