"""`interleave = "request"`: a hot sweep whose passes bench their configs request by request.

Real `ddtune serve` on the tiny checkpoint, the real bench and store: every trial of a
pass is done, its requests took turns with the other configs' (by their send times),
and each response carries the fingerprint of its own trial's config."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from ddtune.errors import UserError
from ddtune.sweep.plan import parse_spec, read_spec
from ddtune.sweep.reporting import write_report
from ddtune.sweep.run.loop import run_sweep
from ddtune.sweep.store.db import Store

SWEEP = """
    [sweep]
    name = "turns"
    repeats = 2
    interleave = "request"
    baseline = { mode = "ar" }
"""
CONFIGS = """
    [space]
    mode = ["ddtree"]
    budget = [2, 8]
    topk = [2]
"""


def test_a_pass_benches_its_configs_in_turns(tmp_path, tiny_models, spec_writer):
    spec_path = spec_writer(tmp_path, tiny_models, SWEEP, CONFIGS, service='control = "hot"')
    spec = read_spec(spec_path)
    with open(tmp_path / "out.txt", "w") as out:
        summary = run_sweep(spec, tmp_path / "store.sqlite", Console(file=out, width=200))
    assert summary.exit_code == 0 and summary.done == 6, (tmp_path / "out.txt").read_text()
    store = Store(tmp_path / "store.sqlite")
    try:
        rows = store.db.execute(
            "SELECT t.label, t.repeat, t.config_hash, s.row_json FROM samples s "
            "JOIN attempts a ON a.id = s.attempt_id JOIN trials t ON t.id = a.trial_id"
        ).fetchall()
        spent = store.trial_seconds(store.sweep_row("turns")["id"])
        # each trial counts its own share (readiness + its turns), not the pass it overlaps
        assert len(spent) == 6 and sum(spent.values()) <= summary.seconds
        with open(tmp_path / "report.txt", "w") as sink:
            write_report(store, store.sweep_row("turns"), tmp_path / "report", Console(file=sink))
    finally:
        store.close()
    for repeat in (1, 2):
        sent = sorted(
            ((json.loads(r["row_json"]), r["label"]) for r in rows if r["repeat"] == repeat),
            key=lambda row: row[0]["sent_at"],
        )
        turns = [sent[k : k + 3] for k in range(0, len(sent), 3)]
        assert len(turns) == 3  # short, long, coding: one request each per config
        for turn in turns:  # every config sends request r before any sends r + 1
            assert len({label for _, label in turn}) == 3
            assert len({(s["workload"], s["index"]) for s, _ in turn}) == 1
    by_label: dict[str, set[str]] = {}
    for r in rows:
        by_label.setdefault(r["label"], set()).add(json.loads(r["row_json"])["fingerprint"])
    stems = {label: {f.rsplit("-g", 1)[0] for f in prints} for label, prints in by_label.items()}
    assert all(len(s) == 1 for s in stems.values())  # each trial ran under one config
    assert len(set().union(*stems.values())) == 3  # and no two trials under the same
    assert all(len(prints) == 6 for prints in by_label.values())  # a switch per request
    report = (tmp_path / "report" / "report.md").read_text()
    assert "took turns request by request" in report  # the method is named
    assert "different server identity" not in report  # each trial's identity was recorded


@pytest.mark.parametrize(
    "extra, key",
    [
        ("", "service.control"),  # a restart per config: no switching between requests
        ('order = "random"', "sweep.order"),
        ("passes_per_start = 2", "sweep.passes_per_start"),
    ],
)
def test_interleave_request_refuses_what_cannot_switch_per_request(extra, key):
    kind = 'control = "hot"' if key != "service.control" else ""
    text = f"""
[sweep]
name = "x"
interleave = "request"
{extra}
[[configs]]
mode = "ar"
[service]
{kind}
command = ["ddtune", "serve", "--port", "{{port}}"]
port = 18000
"""
    with pytest.raises(UserError) as info:
        parse_spec(text)
    assert info.value.key == key
    assert "interleave = 'request'" in str(info.value) and "interleave = 'trial'" in str(info.value)


def test_interleave_request_refuses_concurrent_benches():
    text = """
[sweep]
name = "x"
interleave = "request"
[[configs]]
mode = "ar"
[service]
control = "hot"
command = ["ddtune", "serve", "--port", "{port}"]
port = 18000
[bench]
concurrency = 2
"""
    with pytest.raises(UserError) as info:
        parse_spec(text)
    assert info.value.key == "bench.concurrency" and ":" in str(info.value)


def test_a_config_that_fails_in_a_pass_is_retried_alone_and_the_rest_bench_in_turns(
    tmp_path, tiny_models, spec_writer
):
    sweep = SWEEP.replace('name = "turns"', 'name = "broken"')
    configs = """
        [[configs]]
        mode = "ddtree"
        budget = 4
        topk = 2

        [[configs]]          # the tiny model's context is 512: the server refuses it
        mode = "ddtree"
        budget = 600
        topk = 2
    """
    spec_path = spec_writer(
        tmp_path, tiny_models, sweep, configs, attempts=2, service='control = "hot"'
    )
    with open(tmp_path / "out.txt", "w") as out:
        summary = run_sweep(read_spec(spec_path), tmp_path / "store.sqlite", Console(file=out))
    assert (summary.done, summary.failed, summary.exit_code) == (4, 2, 1)
    store = Store(tmp_path / "store.sqlite")
    stale = 0
    try:
        for trial in store.trials(store.sweep_row("broken")["id"]):
            attempts = store.attempts(trial["id"])
            stale += len(attempts) - 1 if "b600" not in trial["label"] else 0
            if "b600" in trial["label"]:  # its pass's attempt, then one alone
                assert trial["status"] == "failed" and len(attempts) == 2
                assert all(a["failure"] != "interrupted" for a in attempts)
            else:  # done; first in turns, or alone after its server was stopped
                assert trial["status"] == "done" and attempts[-1]["state"] == "done"
                for attempt in attempts[:-1]:  # READY before b600's failure stopped the server
                    assert "a later trial's failure in this pass stopped" in attempt["detail"]
    finally:
        store.close()
    assert stale >= 1  # with seed 0 a READY trial precedes b600 in some pass
    assert "attempt 1/2 failed" in (tmp_path / "out.txt").read_text()
