"""`sweep run` and `sweep plan` ask the engine's own parser first: a config it refuses stops
the sweep with exit 2 before anything is stopped or started, one line per refused config.

The service is a FAKE systemd unit that is already running (the production instance):
after a refusal it still runs the same invocation, was never stopped, got no drop-in, and
no store was made. The engine is the FAKE sglang of tests/engines/fixtures (SGLang 0.5.23's
parser flags and refusal messages); tests/integration/test_sglang_live.py does the same
against the real SGLang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ddtune.cli import main

TESTS = Path(__file__).parents[2]
FAKE_SGLANG = TESTS / "engines" / "fixtures" / "fake_sglang"
FAULT_SERVER = TESTS / "services" / "fake_fault_server.py"
MODELS = TESTS.parent / "src" / "ddtune" / "assets" / "models"
UNIT = "sglang-test.service"
DFLASH_ON_CPU = (
    "SGLang 0.5.23 refused it at resolve: ValueError: DFLASH speculative decoding is not "
    "supported by CpuSRTPlatform on device 'cpu'."
)


def write_spec(folder: Path, root: Path, port: int, python: str, extra: list[str]) -> Path:
    """A systemd sweep of UNIT: dflash window none/64 against an ar baseline."""
    command = [python, "-m", "ddtune.launchers", "sglang", "--python", python]
    command += [
        "--model-path",
        str(MODELS / "target"),
        "--draft-model-path",
        str(MODELS / "drafter"),
    ]
    command += ["--mode", "{mode}", "--window", "{window}", "--port", "{port}", "--", *extra]
    text = textwrap.dedent(f"""
        [sweep]
        name = "preflight"
        repeats = 1
        baseline = {{ mode = "ar" }}
        [space]
        mode = ["dflash"]
        window = ["none", 64]
        [service]
        control = "systemd"
        unit = "{UNIT}"
        systemd_dir = "{root / "run"}"
        engine = "sglang"
        port = {port}
        gpu = "off"
        command = {json.dumps(command)}
        env = {{ PYTHONPATH = "{FAKE_SGLANG}" }}
        """)
    path = folder / "spec.toml"
    path.write_text(text)
    return path


@pytest.fixture
def running_unit(fake_systemd, port):
    """UNIT installed and started (the fake fault server); yields (root, its properties)."""
    root, install_unit = fake_systemd
    install_unit(UNIT, f"{sys.executable} -S {FAULT_SERVER} --port {port}")
    subprocess.run(["systemctl", "start", UNIT], check=True)
    yield root, unit_state(UNIT)
    subprocess.run(["systemctl", "stop", UNIT], check=True)


def unit_state(unit: str) -> dict[str, str]:
    out = subprocess.run(
        ["systemctl", "show", unit, "--property=InvocationID,MainPID,ActiveState"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines())


def assert_untouched(root: Path, before: dict[str, str], store: Path) -> None:
    """The production instance runs on: same invocation, never stopped, no drop-in, no store."""
    assert unit_state(UNIT) == before and before["ActiveState"] == "active"
    state = json.loads((root / "state" / f"{UNIT}.json").read_text())
    assert len(state["starts"]) == 1 and not state.get("stopped"), state
    assert not (root / "run" / f"{UNIT}.d").exists()
    assert not store.parent.exists()


def test_an_algorithm_the_engine_refuses_stops_the_sweep_before_anything(
    tmp_path, running_unit, port, capsys
):
    root, before = running_unit
    spec = write_spec(tmp_path, root, port, sys.executable, [])
    store = tmp_path / "s" / "store.sqlite"
    assert main(["sweep", "run", str(spec), "--store", str(store)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        "ddtune: error: the engine refused 2 of 3 planned launch command(s); nothing was "
        "stopped or started (fix the spec, or set [service] engine_check = false to start "
        "without the engine's argument check):",
        f"  dflash wnone: mode (--speculative-algorithm): {DFLASH_ON_CPU}",
        f"  dflash w64: mode (--speculative-algorithm): {DFLASH_ON_CPU}",
    ]
    assert_untouched(root, before, store)


def test_a_misspelled_flag_stops_the_sweep_and_sweep_plan_shows_the_same(
    tmp_path, running_unit, port, capsys
):
    root, before = running_unit
    extra = ["--device", "cuda", "--max-runing-requests", "3"]
    spec = write_spec(tmp_path, root, port, sys.executable, extra)
    store = tmp_path / "s" / "store.sqlite"
    refused = (
        "service.command (--max-runing-requests): SGLang 0.5.23 refused it at argparse: "
        "unrecognized arguments: --max-runing-requests 3"
    )
    assert main(["sweep", "run", str(spec), "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[1:] == [f"  {label}: {refused}" for label in ("ar", "dflash wnone", "dflash w64")]
    assert main(["sweep", "plan", str(spec), "--store", str(store)]) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-4].startswith(f"engine check: SGLang 0.5.23 ({sys.executable}, as ")
    assert out[-4].endswith("refused 3 of 3 launch command(s) in " + out[-4].split(" in ")[-1])
    assert out[-3:] == [
        f"  refused: {label}: {refused}" for label in ("ar", "dflash wnone", "dflash w64")
    ]
    assert_untouched(root, before, store)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can run the check as the unit's User=")
def test_the_check_runs_as_the_units_user(tmp_path, fake_systemd, port, capsys):
    """/usr/bin/python3 (which `nobody` may run) stands in for the engine's Python."""
    python = "/usr/bin/python3"
    if not os.access(python, os.X_OK):
        pytest.skip(f"no {python}")
    root, install_unit = fake_systemd
    install_unit(UNIT, "/bin/true", "User=nobody\nTimeoutStopSec=2\n")
    spec = write_spec(tmp_path, root, port, python, ["--device", "cuda"])
    assert main(["sweep", "plan", str(spec), "--store", str(tmp_path / "s" / "x.sqlite")]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert f"engine check: SGLang 0.5.23 ({python}, as nobody) accepted all 3" in summary
