"""`ddtune demo`: the shipped specs parse; the demo's two passes run on a tiny checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddtune.errors import UserError
from ddtune.sweep.demo import HOT_SPEC, RESTART_SPEC, run_demo
from ddtune.sweep.plan import read_spec
from ddtune.sweep.store.db import Store

CONFIGS = """
    [[configs]]
    mode = "ddtree"
    budget = 4
    topk = 2
"""


def test_shipped_demo_specs_parse_and_use_both_controllers():
    restart, hot = read_spec(RESTART_SPEC), read_spec(HOT_SPEC)
    assert (restart.service.control, hot.service.control) == ("process", "hot")
    assert restart.baseline.label() == hot.baseline.label() == "ar"
    # the hot pass races: 3 passes over everyone, then the survivors, at most 30 passes
    assert (hot.strategy, hot.min_repeats, hot.repeats) == ("race", 3, 30)
    # sized for 15 minutes from a fresh clone on 2 cores (docs/benchmarks.md): trial
    # count and trial time both capped, so a slow machine ends sooner, not later
    assert (hot.max_trials, hot.max_hours) == (120, 0.15)
    assert hot.tolerance <= 0.05 and hot.order == "interleaved"
    assert len(hot.configs) >= 8 and {c.params.window for c in hot.configs} == {None, 64}
    assert len({c.params.budget for c in hot.configs}) >= 2  # budget x topk x window
    assert len({c.params.topk for c in hot.configs}) >= 2
    # the restart pass: a small grid, every trial a new server
    assert (restart.strategy, restart.repeats, len(restart.configs)) == ("grid", 3, 2)
    assert restart.bench.temperature == hot.bench.temperature == 0
    assert restart.bench == hot.bench  # one bench, so the two reports compare
    assert restart.service.command[0] == sys.executable  # "{python}" resolved
    assert restart.service.port != hot.service.port


def test_demo_over_a_store_from_older_demo_specs_says_to_start_fresh(tmp_path):
    store = Store(tmp_path / "store.sqlite")
    try:
        store.open_sweep("demo", "# an older demo spec", "0" * 16, plan=[])
    finally:
        store.close()
    with pytest.raises(UserError, match=r"ddtune demo --fresh"):
        run_demo(tmp_path)


def _identities(store_path: Path) -> list[dict]:
    store = Store(store_path, create=False)
    try:
        rows = store.db.execute("SELECT identity_json FROM attempts WHERE state='done' ORDER BY id")
        return [json.loads(r[0]) for r in rows]
    finally:
        store.close()


@pytest.mark.slow  # two passes of real server starts: about a minute on a loaded machine
def test_demo_runs_a_restart_pass_and_a_hot_pass(tmp_path, tiny_models, spec_writer):
    restart_dir, hot_dir = tmp_path / "restart", tmp_path / "hot"
    restart_dir.mkdir(), hot_dir.mkdir()
    sweep = '[sweep]\nname = "{}"\nrepeats = 2\nbaseline = {{ mode = "ar" }}\n'
    restart = spec_writer(restart_dir, tiny_models, sweep.format("r"), CONFIGS)
    hot = spec_writer(hot_dir, tiny_models, sweep.format("h"), CONFIGS, service='control = "hot"')
    out = tmp_path / "demo"
    cmd = [
        sys.executable,
        "-m",
        "ddtune.cli",
        "demo",
        "--spec",
        str(restart),
        "--hot-spec",
        str(hot),
        "--out",
        str(out),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        "restart pass" in done.stderr
        and "hot pass" in done.stderr
        and "demo finished in" in done.stderr
    )
    assert (out / "report" / "report.html").is_file() and (
        out / "hot" / "report" / "report.html"
    ).is_file()
    restarted = _identities(out / "store.sqlite")
    in_place = _identities(out / "hot" / "store.sqlite")
    assert len(restarted) == len(in_place) == 4
    assert len({i["instance_id"] for i in restarted}) == 4  # a new server per trial
    assert len({i["instance_id"] for i in in_place}) == 1  # one server, reconfigured
