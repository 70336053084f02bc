"""Trial records grouped into passes (blocks): what the race and the blocked analysis read.

A trial's `repeat` is its pass number. With `passes_per_start = k` one server
start is benched k times (repeats (b-1)·k+1 .. b·k of block b), so a *block*
is k consecutive passes and a config's value in a block is the geometric mean
of its completed benches there: the start-to-start spread stays in the
analysis instead of being hidden by reused starts. See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import geometric_mean

from ddtune.records import TrialRecord
from ddtune.report.summarize import OBJECTIVE_METRICS, record_values
from ddtune.stats.blocked import block_of
from ddtune.sweep.plan.fold import FINISHED
from ddtune.sweep.plan.races.by_pass import PassResult


def objective_value(record: TrialRecord, objective: str) -> float | None:
    """The objective of one done trial; None for unfinished/failed trials or missing metrics."""
    if record.status != "done":
        return None
    value = record_values(record).get(OBJECTIVE_METRICS[objective])
    return value if value is not None and value > 0 else None


def blocked_samples(
    records: Sequence[TrialRecord], objective: str, passes_per_start: int = 1
) -> dict[str, dict[int, float]]:
    """label -> block -> geometric mean of the completed trials' objective in that block."""
    values: dict[str, dict[int, list[float]]] = {}
    for record in records:
        value = objective_value(record, objective)
        if value is not None:
            block = block_of(record.repeat, passes_per_start)
            values.setdefault(record.label, {}).setdefault(block, []).append(value)
    return {
        label: {block: geometric_mean(v) for block, v in blocks.items()}
        for label, blocks in values.items()
    }


def pass_results(
    records: Sequence[TrialRecord],
    objective: str,
    passes_per_start: int = 1,
    seconds: Mapping[int, float] | None = None,
) -> list[PassResult]:
    """The finished blocks, in order, as race input; stops at the first unfinished block.

    A block is finished when every trial in it is done or failed. `seconds`
    maps trial id -> stored duration (for `max_hours`).
    """
    by_block: dict[int, list[TrialRecord]] = {}
    for record in records:
        by_block.setdefault(block_of(record.repeat, passes_per_start), []).append(record)
    samples = blocked_samples(records, objective, passes_per_start)
    results = []
    for block in range(1, max(by_block, default=0) + 1):
        group = by_block.get(block, [])
        if not group or any(r.status not in FINISHED for r in group):
            break
        labels = list(dict.fromkeys(r.label for r in group))
        values = {label: samples.get(label, {}).get(block) for label in labels}
        spent = sum((seconds or {}).get(r.trial_id, 0.0) for r in group)
        results.append(PassResult(values, _coding(group), spent))
    return results


def _coding(group: Sequence[TrialRecord]) -> dict[str, tuple[int, int]]:
    pooled: dict[str, tuple[int, int]] = {}
    for record in group:
        if record.coding is None:
            continue
        p, t = pooled.get(record.label, (0, 0))
        pooled[record.label] = (p + record.coding[0], t + record.coding[1])
    return pooled


__all__ = [
    "blocked_samples",
    "block_of",
    "objective_value",
    "pass_results",
]
