"""`RunSummary.on_pass` (the live report's trigger, issue 28): once when a pass's last
trial is counted, whether a pass's trials are counted as they finish or, as in a
request-interleaved pass, all stored first and counted after; once more at the end."""

from __future__ import annotations

from pathlib import Path

from ddtune.sweep.plan.prepare import plan_spec, prepare
from ddtune.sweep.run.common import RunSummary
from ddtune.sweep.store.db import Store

BODY = """
[sweep]
name = "hook"
repeats = 2
baseline = { mode = "ar" }

[[configs]]
mode = "ddtree"
budget = 4
topk = 2
"""


def test_on_pass_runs_once_per_pass_and_at_the_end(tmp_path: Path, spec_text) -> None:  # noqa: ANN001
    spec = spec_text.parse(BODY)
    store = Store(tmp_path / "store.sqlite")
    try:
        sweep_id = store.open_sweep(spec.name, spec.text, spec.hash, plan_spec(spec))
        calls: list[tuple[int, bool]] = []
        summary = RunSummary(sweep_id, store.path, 4, 0)
        summary.on_pass = lambda s, sweep, final: calls.append((summary.done, final))
        summary.sweep = prepare(spec, store)
        first, second = [[t for t in store.trials(sweep_id) if t["repeat"] == p] for p in (1, 2)]
        for trial in first:  # one by one: finished, then counted
            store.finish_trial(trial["id"], "failed")  # finished (the count says done: a tally)
            summary.tally(store, trial, "done")
            summary.landed(store, trial)
        assert calls == [(2, False)]
        for trial in second:  # a request-interleaved pass: all finished, then counted
            store.finish_trial(trial["id"], "failed")
        for trial in second:
            summary.tally(store, trial, "done")
            summary.landed(store, trial)
        assert calls == [(2, False), (3, False)]  # when the pass was complete in the store
        summary.report(store, final=True)
        assert calls == [(2, False), (3, False), (4, True)]
    finally:
        store.close()


def test_a_trial_added_to_an_ended_pass_runs_on_pass_again(tmp_path: Path, spec_text) -> None:  # noqa: ANN001
    """A restart-bound race plans one trial at a time: pass 1 ends after each of its trials."""
    spec = spec_text.parse(BODY)
    store = Store(tmp_path / "store.sqlite")
    try:
        plan = plan_spec(spec)
        first = [t for t in plan if t.repeat == 1]
        sweep_id = store.open_sweep(spec.name, spec.text, spec.hash, first[:1])
        calls: list[tuple[int, bool]] = []
        summary = RunSummary(sweep_id, store.path, 1, 0)
        summary.on_pass = lambda s, sweep, final: calls.append((summary.done, final))
        summary.sweep = prepare(spec, store)
        (trial,) = store.trials(sweep_id)
        store.finish_trial(trial["id"], "failed")
        summary.tally(store, trial, "done")
        summary.landed(store, trial)
        store.add_trials(sweep_id, first[1:])  # the race plans the next bench of pass 1
        (added,) = store.trials(sweep_id, ("pending",))
        store.finish_trial(added["id"], "failed")
        summary.tally(store, added, "done")
        summary.landed(store, added)
        assert calls == [(1, False), (2, False)]
    finally:
        store.close()
