"""The breaker, against the FAKE fault server (real processes) that counts its starts in
$FAKE_COUNT_STARTS and fails every start while the file $FAKE_FAIL_IF exists (a fault of the
service, whatever the config): at most 5 starts, exit 1 with the class and the log tail,
and the same command resumes every config once the fault is fixed."""

from __future__ import annotations

from pathlib import Path

from ddtune.cli import main
from ddtune.sweep.run.policy import Breaker
from ddtune.sweep.store.db import Store

FIVE = "".join(
    f"""
    [[configs]]
    mode = "ddtree"
    budget = {budget}
    topk = 2
"""
    for budget in (2, 4, 6, 8, 10)
)
BASELINE = 'repeats = 1\nbaseline = { mode = "ar" }'


def _spec(tmp_path: Path, writer, port: int, configs: str = FIVE) -> tuple[Path, Path, Path]:
    ledger, fault = tmp_path / "starts.txt", tmp_path / "disk-full"
    service = f'env = {{ FAKE_COUNT_STARTS = "{ledger}", FAKE_FAIL_IF = "{fault}" }}'
    spec = writer(tmp_path, "brk", configs, port, service=service, sweep=BASELINE, attempts=2)
    return spec, ledger, fault


def _starts(ledger: Path) -> int:
    return len(ledger.read_text().splitlines()) if ledger.exists() else 0


def test_a_service_that_fails_every_start_costs_5_starts_then_resumes_once_fixed(
    tmp_path, fake_spec_writer, port, capsys
):
    spec, ledger, fault = _spec(tmp_path, fake_spec_writer, port)
    fault.write_text("")
    store = tmp_path / "s" / "store.sqlite"
    code = main(["sweep", "run", str(spec), "--store", str(store)])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 1, err
    # 2 + 1 + 1 for three configs, 1 for the control (none if the baseline's trial was one)
    assert _starts(ledger) in (4, 5)
    assert _starts(ledger) == 4 + ("starting the baseline as a control" in err)
    assert "the service fails whatever the config: crashed(3)" in err
    assert "no space left on device" in err  # the log tail
    assert "sweep report" not in err and "failed ddtree" not in err  # reopened, not failed
    db = Store(store, create=False)
    statuses = [t["status"] for t in db.trials(db.sweep_row()["id"])]
    db.close()
    assert "failed" not in statuses  # the streak's trials are reopened for the resume
    fault.unlink()  # the fault fixed: the same command measures every config
    assert main(["sweep", "run", str(spec), "--store", str(store)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "6 trial(s) done now" in err, err


def test_configs_that_fail_on_their_own_pass_the_control_and_the_sweep_goes_on(
    tmp_path, fake_spec_writer, port, capsys
):
    crashing = FIVE.replace("topk = 2", 'topk = 2\n    vars = { delay = "bogus" }')
    spec, ledger, _ = _spec(tmp_path, fake_spec_writer, port, crashing)
    store = tmp_path / "s" / "store.sqlite"
    code = main(["sweep", "run", str(spec), "--store", str(store)])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 1, err
    assert "the baseline is READY, so these configs fail on their own" in err
    assert "whatever the config" not in err
    assert "1 trial(s) done now" in err and "5 failed" in err


def test_the_breaker_counts_one_class_on_consecutive_configs():
    breaker = Breaker(3)
    assert breaker.attempts(2) == 2
    assert not breaker.record(1, "failed", "crashed(1)")
    assert breaker.attempts(2) == 1  # a streak is open: one attempt each
    assert not breaker.record(2, "failed", "oom")  # another class starts a new streak
    assert not breaker.record(3, "failed", "oom")
    assert not breaker.record(4, "done", None)  # a done trial ends it
    assert breaker.attempts(2) == 2
    for trial in (5, 6):
        assert not breaker.record(trial, "failed", "oom")
    assert breaker.record(7, "failed", "oom") and breaker.streak == [5, 6, 7]
    assert not Breaker(0).record(1, "failed", "oom")  # 0: off
