"""`ddtune sweep run` exit codes, against real server processes (the FAKE fault server):
0 all done, 1 some or all trials failed, 2 bad input, 3 interrupted; the summary counts
the failure classes; `sweep status` names the log of an interrupted attempt."""

from __future__ import annotations

import signal

from ddtune.cli import main
from ddtune.services import procs
from ddtune.sweep.store.files import attempt_dir

GOOD = """
    [[configs]]
    mode = "ddtree"
    budget = 4
    topk = 2
"""
CRASHING = """
    [[configs]]          # the fake server exits 2 on `--ready-delay bogus`: crashed(2)
    mode = "ddtree"
    budget = 8
    topk = 2
    vars = { delay = "bogus" }
"""
OTHER_CRASH = CRASHING.replace("budget = 8", "budget = 16")


def _run(spec, store, capsys) -> tuple[int, str]:
    code = main(["sweep", "run", str(spec), "--store", str(store)])
    return code, " ".join(capsys.readouterr().err.split())  # rich wraps at 80 columns


def test_every_trial_done_exits_0(tmp_path, fake_spec_writer, port, capsys):
    spec = fake_spec_writer(tmp_path, "good", GOOD + GOOD.replace("4", "8"), port)
    code, err = _run(spec, tmp_path / "s" / "store.sqlite", capsys)
    assert code == 0, err
    assert "2 trial(s) done now" in err and "failure classes" not in err


def test_some_trials_failed_exits_1_and_counts_the_failure_classes(
    tmp_path, fake_spec_writer, port, capsys
):
    spec = fake_spec_writer(tmp_path, "some", GOOD + CRASHING, port, attempts=2)
    code, err = _run(spec, tmp_path / "s" / "store.sqlite", capsys)
    assert code == 1, err
    assert "1 trial(s) done now" in err and "1 failed" in err
    assert "failure classes: crashed(2): 1" in err


def test_every_trial_failed_exits_1_also_when_rerun(tmp_path, fake_spec_writer, port, capsys):
    spec = fake_spec_writer(tmp_path, "none", CRASHING + OTHER_CRASH, port)
    store = tmp_path / "s" / "store.sqlite"
    code, err = _run(spec, store, capsys)
    assert code == 1, err  # was 0: a sweep in which every trial failed "succeeded"
    assert "0 trial(s) done now" in err and "failure classes: crashed(2): 2" in err
    assert "nothing was measured" in err and "sweep retry --failed" in err
    assert "next: ddtune sweep report" not in err  # nothing to report
    code, err = _run(spec, store, capsys)  # failed trials are kept, not rerun: still 1
    assert code == 1, err
    assert "2 trial(s) failed in an earlier run" in err and "sweep retry --failed" in err


def test_bad_input_exits_2_and_starts_nothing(tmp_path, fake_spec_writer, port, capsys):
    spec = fake_spec_writer(tmp_path, "bad", GOOD.replace("topk", "topp"), port)
    code, err = _run(spec, tmp_path / "s" / "store.sqlite", capsys)
    assert code == 2
    assert "configs.0.topp" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s").exists()


def test_interrupted_exits_3_and_status_shows_the_attempts_service_log(
    tmp_path, fake_spec_writer, runners, port, capsys
):
    slow = GOOD.replace("topk = 2", 'topk = 2\n    vars = { delay = "600" }')  # keeps loading
    spec = fake_spec_writer(tmp_path, "slow", slow, port)
    store = tmp_path / "s" / "store.sqlite"
    runner = runners.start(spec, store)
    runners.wait_listening(port)
    runner.send_signal(signal.SIGINT)
    assert runner.wait(timeout=60) == 3  # was 130
    log = (store.parent / "runner.log").read_text()
    assert "interrupted" in log and "resume with: ddtune sweep run" in log
    assert procs.port_listeners(port) == {}  # the service was stopped
    assert main(["sweep", "status", "--store", str(store)]) == 0
    status = "".join(capsys.readouterr().out.split())  # the table may wrap long lines
    service_log = (
        attempt_dir(store.parent.resolve(), 1, "ddtree b4 k2 wnone delay=600", 1, 1) / "service.log"
    )
    assert "attempt1:interrupted" in status and "(log:none)" not in status  # was "log: none"
    assert f"(log:{service_log})" in status and "loading model" in service_log.read_text()


def test_demo_exits_like_its_passes(tmp_path, fake_spec_writer, port, capsys):
    """`ddtune demo` runs both passes and reports; a pass with a failed trial makes it 1
    (was 0); an interrupted or blocked pass stops the demo with the pass's 3 or 4."""
    from ddtune.sweep.demo import run_demo

    restart = fake_spec_writer(tmp_path, "r", GOOD + CRASHING, port)
    hot = fake_spec_writer(
        tmp_path, "h", GOOD + GOOD.replace("4", "8"), port, service='control = "hot"'
    )
    hot.write_text(hot.read_text().replace('"{delay}"]', '"{delay}", "--hot"]'))
    assert run_demo(tmp_path / "demo", restart, hot) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "failure classes: crashed(2): 1" in err and "demo finished in" in err
    assert (tmp_path / "demo" / "hot" / "report" / "report.html").is_file()
