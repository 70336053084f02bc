"""`ddtune sweep apply --schedule` on a FAKE systemd unit (tests/services/fake_systemd.py)
serving the FAKE fault server (which reports the schedule it was started with, as
`ddtune serve --schedule` does): applied as a drop-in plus its schedule file, READY; a schedule
whose command does not come up rolled back to the previous apply (verified by its own
command); --revert back to the unit's own configuration; process kind prints the command; a
sweep without load levels has no schedule to apply."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ddtune.cli import main
from ddtune.engines.schedule import Schedule, Tier
from ddtune.params import DecodeParams

FAULT_SERVER = Path(__file__).parents[1] / "services" / "fake_fault_server.py"
UNIT = "fake-sched.service"
CONFIGS = """
    [[configs]]
    mode = "ddtree"
    budget = 4
    topk = 2
    [[configs]]
    mode = "ddtree"
    budget = 8
    topk = 2
"""
B4, B8 = DecodeParams("ddtree", 4, 2), DecodeParams("ddtree", 8, 2)
DELAY = {"delay": "0"}


def write(tmp_path: Path, name: str, schedule: Schedule) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"report": {"schedule": schedule.to_wire()}}))
    return path


def apply(store: Path, *args: str) -> int:
    return main(["sweep", "apply", "--store", str(store), *args])


def serving(port: int) -> dict:
    return httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=5).json()["config"]


@pytest.fixture
def swept(tmp_path, fake_systemd, fake_spec_writer, port):
    root, install_unit = fake_systemd
    install_unit(UNIT, f"{sys.executable} -S {FAULT_SERVER} --port {port} --mode ar")
    service = f'control = "systemd"\nunit = "{UNIT}"\nsystemd_dir = "{root / "run"}"\n'
    spec = fake_spec_writer(tmp_path, "sched", CONFIGS, port, service)
    store = tmp_path / "s" / "store.sqlite"
    assert main(["sweep", "run", str(spec), "--store", str(store)]) == 0
    yield store, root
    subprocess.run(["systemctl", "stop", UNIT], check=True)


def test_a_schedule_applied_rolled_back_and_reverted(swept, port, tmp_path, capsys):
    store, root = swept
    dropin = root / "units" / f"{UNIT}.d" / "ddtune-applied.conf"
    good = Schedule((Tier(2, B4, DELAY), Tier(None, B8, DELAY)))
    assert apply(store, "--schedule", str(write(tmp_path, "good.json", good))) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "ddtune serve switches by requests in flight" in err and "READY in" in err
    text = dropin.read_text()
    files = list(dropin.parent.glob("ddtune-schedule-*.json"))
    assert len(files) == 1 and f'"--schedule" "{files[0]}"' in text
    assert serving(port)["budget"] == 4 and serving(port)["schedule"] == good.to_wire()

    bad = Schedule((Tier(2, B4, {"delay": "bogus"}), Tier(None, B8, DELAY)))  # exits 2
    assert apply(store, "--schedule", str(write(tmp_path, "bad.json", bad))) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "not READY: crashed(2)" in err and "the service is READY" in err
    assert dropin.read_text() == text and serving(port)["schedule"] == good.to_wire()

    # the failed apply kept the schedule as the previous drop-in: --revert restarts it,
    # READY against its own command (`--schedule FILE`), then the unit's own configuration
    assert apply(store, "--revert") == 0
    assert "previous applied config: READY" in " ".join(capsys.readouterr().err.split())
    assert serving(port)["schedule"] == good.to_wire()
    assert apply(store, "--revert") == 0
    assert not dropin.parent.exists() and serving(port)["mode"] == "ar"
    assert "schedule" not in serving(port)


def test_process_kind_prints_the_command_and_no_load_levels_no_schedule(
    tmp_path, fake_spec_writer, port, capsys
):
    spec = fake_spec_writer(tmp_path, "proc", CONFIGS, port)
    store = tmp_path / "p" / "store.sqlite"
    assert main(["sweep", "run", str(spec), "--store", str(store)]) == 0
    capsys.readouterr()
    assert apply(store, "--schedule") == 2
    assert "has no schedule" in capsys.readouterr().err
    one = Schedule((Tier(None, B8, DELAY),))
    assert apply(store, "--schedule", str(write(tmp_path, "one.json", one))) == 0
    err = capsys.readouterr().err
    command = err.split("serve it with:\n", 1)[1].strip()
    assert "--budget 8 --topk 2" in command and "--schedule " in command
    written = Path(command.split("--schedule ", 1)[1].split()[0])
    assert json.loads(written.read_text())["schedule"] == one.to_wire()
    assert apply(store, "--schedule", "--config", "x") == 2
