"""Which store a `ddtune sweep` command uses when `--store` is not given (issue 44, item 5).

A command that changes the service (`apply`, `retry`) takes the only store under runs/
and names it; with several it refuses, listing them, and changes nothing; a store of
several sweeps needs `--sweep`. A reading command (`status`, `export`, `report`) takes
the newest and says which on stderr. `sweep plan --costs-from` names the store a plan
takes its costs from; `sweep plan --store` names the store the run will write."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ddtune.cli import main
from ddtune.sweep.store.db import Store

ROOT = Path(__file__).resolve().parents[2]
SPEC = (ROOT / "examples" / "demo.toml").read_text()


def make_store(folder: Path, *sweeps: str) -> Path:
    path = folder / "store.sqlite"
    store = Store(path)
    try:
        for name in sweeps:
            store.open_sweep(name, SPEC, f"hash-{name}", [])
    finally:
        store.close()
    return path


@pytest.fixture
def two_stores(tmp_path, monkeypatch) -> tuple[Path, Path]:
    monkeypatch.chdir(tmp_path)
    older = make_store(Path("runs/older"), "demo")
    time.sleep(0.05)
    newer = make_store(Path("runs/newer"), "demo")
    return older, newer


@pytest.mark.parametrize("command", [["apply"], ["apply", "--dry-run"], ["retry"]])
def test_a_command_that_changes_the_service_never_picks_among_stores(two_stores, command, capsys):
    assert main(["sweep", *command]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "2 stores under runs/" in err[0] and "pass --store PATH" in err[0]
    assert all(str(path) in err[0] for path in two_stores)


def test_the_only_store_is_used_and_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    make_store(Path("runs/only"), "demo")
    code = main(["sweep", "apply", "--dry-run"])
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "store: runs/only/store.sqlite (the only store under runs/)"
    assert code == 2 and "recommendation is no data" in err[1]  # its sweep ran no trial


def test_a_store_of_several_sweeps_needs_the_sweep_named_to_change_one(
    tmp_path, monkeypatch, capsys
):
    store = make_store(tmp_path / "s", "first", "second")
    assert main(["sweep", "apply", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "holds 2 sweeps (first, second)" in err and "--sweep NAME" in err


@pytest.mark.parametrize("command", ["status", "export"])
def test_a_reading_command_takes_the_newest_and_says_which(two_stores, command, capsys):
    assert main(["sweep", command]) == 0
    err = capsys.readouterr().err
    assert f"store: {two_stores[1]} (the newest of 2 stores under runs/" in err


def test_plan_names_a_missing_costs_store_and_checks_the_run_store(tmp_path, capsys):
    spec = ROOT / "examples" / "demo.toml"
    costs = tmp_path / "costs" / "store.sqlite"
    assert main(["sweep", "plan", str(spec), "--store", str(costs)]) == 0
    assert "note:" not in capsys.readouterr().err  # the store `sweep run --store` will write
    assert not costs.parent.exists()  # checked writable, nothing left behind
    assert main(["sweep", "plan", str(spec), "--costs-from", str(costs)]) == 0
    err = capsys.readouterr().err
    assert f"note: --costs-from {costs}: no sweep store there" in err
