"""Resume across operational changes, against the FAKE fault server counting its starts:
raised timeouts, retry, breaker and repeats keep every finished trial (no start repeats
one) and add the new passes; a change to what is measured is refused with its key, 0 starts."""

from __future__ import annotations

from pathlib import Path

from ddtune.cli import main

THREE = "".join(
    f'\n[[configs]]\nmode = "ddtree"\nbudget = {budget}\ntopk = 2\n' for budget in (2, 4, 6)
)


def _starts(ledger: Path) -> int:
    return len(ledger.read_text().splitlines()) if ledger.exists() else 0


def test_a_resume_with_new_run_settings_keeps_every_finished_trial(
    tmp_path, fake_spec_writer, port, capsys
):
    ledger = tmp_path / "starts.txt"
    service = f'env = {{ FAKE_COUNT_STARTS = "{ledger}" }}'
    spec = fake_spec_writer(tmp_path, "ops", THREE, port, service)
    store = tmp_path / "s" / "store.sqlite"
    assert main(["sweep", "run", str(spec), "--store", str(store)]) == 0
    assert _starts(ledger) == 3
    capsys.readouterr()
    text = spec.read_text()
    changed = (
        text.replace("repeats = 1\n", "repeats = 2\nbreaker = 5\n", 1)
        .replace("start = 60", "start = 120")
        .replace("attempts = 1", "attempts = 3")
    )
    spec.write_text(changed)
    assert main(["sweep", "run", str(spec), "--store", str(store)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "3 trial(s) done now, 3 earlier" in err, err
    assert _starts(ledger) == 6  # only pass 2: none of the finished trials ran again
    spec.write_text(changed.replace("budget = 6", "budget = 12"))
    assert main(["sweep", "run", str(spec), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "different configs" in err and "--store NEW_PATH" in err
    assert _starts(ledger) == 6


def test_a_store_started_with_the_old_service_key_names_resumes_with_the_new_ones(
    tmp_path, fake_spec_writer, port, capsys
):
    ledger = tmp_path / "starts.txt"
    service = f'kind = "process"\nprofile = "ddtune"\nenv = {{ FAKE_COUNT_STARTS = "{ledger}" }}'
    spec = fake_spec_writer(tmp_path, "names", THREE, port, service)
    store = tmp_path / "s" / "store.sqlite"
    assert main(["sweep", "run", str(spec), "--store", str(store)]) == 0
    err = capsys.readouterr().err
    assert err.count("[service] kind is now called control") == 1, err
    assert err.count("[service] profile is now called engine") == 1, err
    assert _starts(ledger) == 3
    report = tmp_path / "report"  # the store, its spec written with the old names, reports
    assert main(["sweep", "report", "--store", str(store), "--out", str(report)]) == 0
    assert "ddtree" in (report / "report.md").read_text()
    capsys.readouterr()
    renamed = spec.read_text().replace('kind = "process"', 'control = "process"')
    renamed = renamed.replace('profile = "ddtune"', 'engine = "ddtune"')
    spec.write_text(renamed.replace("repeats = 1\n", "repeats = 2\n", 1))
    assert main(["sweep", "run", str(spec), "--store", str(store)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "3 trial(s) done now, 3 earlier" in err and "is now called" not in err, err
    assert _starts(ledger) == 6  # pass 2 only: the rename is not a change to what is measured
