"""Issue 28's live page, against real sweeps of the FAKE fault server (stdlib, starts in
~0.1 s): the report folder is rewritten after every pass; `read_state` reads the store
read-only while a runner holds it, after it finished and after it was killed; `ddtune
sweep watch` serves the page, its live part, the JSON state and the report folder."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from rich.console import Console

from ddtune.sweep.plan import read_spec
from ddtune.sweep.plan.prepare import Sweep
from ddtune.sweep.reporting import LiveReport, stored_sweep
from ddtune.sweep.run.loop import run_sweep
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.slot_tables import set_slot
from ddtune.sweep.watch import read_state
from ddtune.sweep.watch.page import fragment_html

CONFIGS = """
    [[configs]]
    mode = "ddtree"
    budget = 4
    topk = 2

    [[configs]]          # the fake server exits 2 on `--ready-delay bogus`: crashed(2)
    mode = "ddtree"
    budget = 8
    topk = 2
    vars = { delay = "bogus" }
"""
PASSES = 3


class Recorder(LiveReport):
    """The real live report, noting what the report said each time it was rewritten."""

    def __init__(self, out_dir: Path) -> None:
        super().__init__(out_dir, "live", Console(file=open(os.devnull, "w")))  # noqa: SIM115
        self.seen: list[tuple[int, int]] = []  # (trials finished: in the report, in the store)

    MAX_SHARE = 1.0  # every pass, however short (the fake server's passes take ~1 s)

    def __call__(self, store: Store, prepared: Sweep, final: bool = False) -> None:
        before = len(self.seconds)
        super().__call__(store, prepared, final)
        if len(self.seconds) == before:
            return  # nothing new to write
        report = json.loads((self.out_dir / "results.json").read_text())
        done = len(store.trials(store.sweep_row("live")["id"], ("done", "failed")))
        finished = [t for t in report["trials"] if t["status"] in ("done", "failed")]
        self.seen.append((len(finished), done))


@pytest.fixture(scope="module")
def finished(tmp_path_factory, fake_spec_writer, spec_text) -> tuple[Path, Recorder]:  # noqa: ANN001
    """One real sweep with the live report, shared by the tests below (which only read it)."""
    return run_live(tmp_path_factory.mktemp("live"), fake_spec_writer, spec_text.free_port())


def run_live(tmp_path: Path, fake_spec_writer, port: int) -> tuple[Path, Recorder]:  # noqa: ANN001
    spec_path = fake_spec_writer(tmp_path, "live", CONFIGS, port)
    spec_path.write_text(spec_path.read_text().replace("repeats = 1", f"repeats = {PASSES}"))
    store = tmp_path / "runs" / "store.sqlite"
    recorder = Recorder(store.parent / "report")
    console = Console(file=open(os.devnull, "w"))  # noqa: SIM115
    summary = run_sweep(read_spec(spec_path), store, console, on_pass=recorder)
    assert (summary.done, summary.failed) == (PASSES, PASSES)
    return store, recorder


def test_the_report_is_rewritten_after_every_pass_and_watch_reads_every_phase(
    finished, tmp_path
) -> None:  # noqa: ANN001
    store, recorder = finished
    # once per pass (interleaved order: both configs of a pass, then the next pass)
    assert [done for _, done in recorder.seen] == [2, 4, 6]
    assert [in_report for in_report, done in recorder.seen] == [2, 4, 6]  # what was done then
    assert len(recorder.seconds) == 3
    assert not list(store.parent.glob("report/.*.tmp"))  # no temporary file left behind
    html = (store.parent / "report" / "report.html").read_text()
    assert '<section id="answer" class="answer">' in html
    throttled = LiveReport(tmp_path / "throttled", "live", Console(file=open(os.devnull, "w")))  # noqa: SIM115
    for final in (False, False, True):  # the 2nd pass ends at once: folded into the end
        reading = Store(store, read_only=True)
        throttled(reading, stored_sweep(reading, reading.sweep_row("live")), final)
    assert (len(throttled.seconds), throttled.skipped) == (2, 1)

    finished = read_state(store)
    assert finished.phase == "finished" and finished.eta == "" and finished.now == []
    assert finished.counts == {"done": 3, "failed": 3, "pending": 0, "running": 0, "interrupted": 0}
    crash = finished.failures[0]
    assert crash.failure == "crashed(2)" and "bogus" in crash.tail, crash
    assert {c.state for c in finished.configs} == {"done"}

    store = Path(shutil.copytree(store.parent, tmp_path / "copy")) / store.name  # to change
    _kill_mid_trial(store)  # as if SIGKILLed: a trial and its attempt left `running`
    killed = read_state(store)
    assert killed.phase == "interrupted" and "ddtune sweep retry --store" in killed.phase_text
    assert _status_of_trial_1(store) == "running"  # read only: no recovery was written

    runner = Store(store, create=False)  # now a live runner holds the lock (this process)
    try:
        runner.acquire()
        _kill_mid_trial(store)
        sweep_id = runner.sweep_row()["id"]  # on Ray, the driver notes what each slot does
        set_slot(runner, sweep_id, "slot-0", state="busy", node="10.0.0.2", trial_id=1)
        set_slot(runner, sweep_id, "slot-0", phase="bench")
        live = read_state(store)
    finally:
        runner.close()
    assert live.phase == "running" and live.phase_text == f"running (runner pid {os.getpid()})"
    assert [t.trial_id for t in live.now] == [1] and live.eta.startswith("about ")
    assert "running now" in {c.state for c in live.configs}
    assert (live.now[0].slot, live.now[0].phase) == ("slot-0", "bench")
    assert [(s["name"], s["state"], s["node"]) for s in live.slots] == [
        ("slot-0", "busy", "10.0.0.2")
    ]
    fragment = fragment_html(live, store.parent / "report")
    assert '<section id="slots">' in fragment and "10.0.0.2" in fragment


def test_the_final_report_reuses_the_last_rewrite_unless_a_pass_ended_since(
    finished, tmp_path, monkeypatch
) -> None:  # noqa: ANN001
    store_path, _ = finished
    out = io.StringIO()
    live = LiveReport(tmp_path / "report", "live", Console(file=out, width=200))
    store = Store(store_path, read_only=True)
    try:
        live(
            store, stored_sweep(store, store.sweep_row("live")), True
        )  # the run's end: one rewrite
        built: list[int] = []

        def build_again(*args: object, **kwargs: object) -> None:
            built.append(1)
            raise RuntimeError("built again")

        import ddtune.report

        monkeypatch.setattr(ddtune.report, "build_report", build_again)
        result = live.final(store)  # current: printed, not built again
        assert built == [] and result is live.last[0]
        assert "answer:" in out.getvalue() and "report for sweep live (6 trials)" in out.getvalue()
        live.dirty = True  # a pass ended since the last rewrite: written again
        with pytest.raises(RuntimeError, match="built again"):
            live.final(store)
        assert built == [1]
    finally:
        store.close()


def test_watch_serves_the_page_its_live_part_the_state_and_the_report(finished) -> None:  # noqa: ANN001
    store, _ = finished
    argv = [sys.executable, "-m", "ddtune.cli", "sweep", "watch", "--store", str(store)]
    watch = subprocess.Popen([*argv, "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert watch.stdout is not None
        line = watch.stdout.readline()
        assert line.startswith(f"watching {store} at http://127.0.0.1:"), line
        url = line.split(" at ")[1].split()[0]
        with httpx.Client(base_url=url, timeout=30) as http:
            page, live = http.get("/"), http.get("/live")
            state = http.get("/state.json").json()
            report = http.get("/report/report.html")
            icon = http.get("/favicon.ico")
        assert page.status_code == 200 and '<div id="live">' in page.text
        assert "setInterval(refresh, 2000)" in page.text
        for section in ("now", "answer-so-far", "configurations", "failures", "report"):
            assert f'<section id="{section}"' in live.text, section
        assert "crashed(2)" in live.text and 'href="report/report.html"' in live.text
        assert state["phase"] == "finished" and state["counts"]["done"] == PASSES
        assert state["answer"][0]["main"] == "Run ddtree b4 k2 wnone"
        assert report.status_code == 200 and "<h2>Answer</h2>" in report.text
        assert icon.status_code == 204
        watch.send_signal(signal.SIGTERM)  # as a service manager stops it; Ctrl-C alike
        assert watch.wait(timeout=30) == 0
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()


def _kill_mid_trial(store: Path) -> None:
    with sqlite3.connect(store) as db:
        db.execute("UPDATE trials SET status='running' WHERE id=1")
        db.execute("UPDATE attempts SET state='running', ended_at=NULL WHERE trial_id=1")


def _status_of_trial_1(store: Path) -> str:
    with sqlite3.connect(store) as db:
        return db.execute("SELECT status FROM trials WHERE id=1").fetchone()[0]
