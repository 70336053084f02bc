"""The canary on a FAKE systemd unit (its own config: `ar`) serving the FAKE fault server,
which counts its starts in $FAKE_COUNT_STARTS: two starts (the first trial config, then the
unit as it was), READY both times, one request; a config that cannot start fails it with
the unit restored all the same; `sweep run --canary` runs the sweep only after it passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ddtune.cli import main

FAULT_SERVER = Path(__file__).parents[1] / "services" / "fake_fault_server.py"
UNIT = "canary-llm.service"
CONFIG = """
    [[configs]]
    mode = "ddtree"
    budget = 4
    topk = 2
"""


@pytest.fixture
def unit(tmp_path, fake_systemd, port):
    """UNIT active on its own config; yields (the start ledger, the service lines)."""
    root, install_unit = fake_systemd
    ledger = tmp_path / "starts.txt"
    exec_start = f"{sys.executable} -S {FAULT_SERVER} --port {port} --mode ar"
    install_unit(UNIT, exec_start, f"Environment=FAKE_COUNT_STARTS={ledger}\nTimeoutStopSec=2\n")
    subprocess.run(["systemctl", "start", UNIT], check=True)
    service = f'control = "systemd"\nunit = "{UNIT}"\nsystemd_dir = "{root / "run"}"\n'
    service += f'env = {{ FAKE_COUNT_STARTS = "{ledger}" }}'
    yield ledger, service
    subprocess.run(["systemctl", "stop", UNIT], check=True)


def _wait_serving(port: int) -> dict:
    import time

    for _ in range(100):
        try:
            return httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=2).json()["config"]
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("the unit does not answer")


def _starts(ledger: Path) -> list[list[str]]:
    return [json.loads(line) for line in ledger.read_text().splitlines()]


def test_the_canary_costs_two_starts_and_leaves_the_unit_as_it_was(
    tmp_path, unit, fake_spec_writer, port, capsys
):
    ledger, service = unit
    _wait_serving(port)
    spec = fake_spec_writer(tmp_path, "can", CONFIG, port, service)
    code = main(["sweep", "canary", str(spec), "--store", str(tmp_path / "s" / "store.sqlite")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 0, err
    assert "canary passed" in err and "restored:" in err
    starts = _starts(ledger)[1:]  # the first is the unit's own start before the canary
    assert len(starts) == 2
    assert "--budget" in starts[0] and starts[0][starts[0].index("--budget") + 1] == "4"
    assert "--budget" not in starts[1]  # the unit's own ExecStart
    assert _wait_serving(port)["mode"] == "ar"
    assert not (tmp_path / "s" / "store.sqlite").exists()  # nothing stored


def test_a_canary_that_cannot_start_fails_and_still_restores(
    tmp_path, unit, fake_spec_writer, port, capsys
):
    ledger, service = unit
    _wait_serving(port)
    bad = CONFIG + '    vars = { delay = "bogus" }\n'
    spec = fake_spec_writer(tmp_path, "can", bad, port, service)
    code = main(["sweep", "run", "--canary", str(spec), "--store", str(tmp_path / "s.sqlite")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 1, err
    assert "canary: not READY" in err and "canary FAILED" in err and "restored:" in err
    assert not (tmp_path / "s.sqlite").exists()  # the sweep did not run
    assert _wait_serving(port)["mode"] == "ar"
