"""`RunSummary.on_pass` (the live report's trigger, issue 28): once when a pass's last
trial is counted, whether a pass's trials are counted as they finish or, as in a
request-interleaved pass, all stored first and counted after; once more at the end."""

from __future__ import annotations

from pathlib import Path

from ddtune.sweep.plan.grid import plan_spec
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
        summary.on_pass = lambda s, final: calls.append((summary.done, final))
        first, second = [[t for t in store.trials(sweep_id) if t["repeat"] == p] for p in (1, 2)]
        for trial in first:  # one by one: finished, then counted
            store.finish_trial(trial["id"], "failed")  # finished (the count says done: a tally)
            summary.count(store, trial, "done")
        assert calls == [(2, False)]
        for trial in second:  # a request-interleaved pass: all finished, then counted
            store.finish_trial(trial["id"], "failed")
        for trial in second:
            summary.count(store, trial, "done")
        assert calls == [(2, False), (3, False)]  # when the pass was complete in the store
        summary.report(store, final=True)
        assert calls == [(2, False), (3, False), (4, True)]
    finally:
        store.close()
