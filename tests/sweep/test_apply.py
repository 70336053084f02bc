"""`ddtune sweep apply` on a FAKE systemd unit (tests/services/fake_systemd.py) serving the
FAKE fault server: a config applied as a persistent drop-in beside the unit and READY by the
full protocol, a second apply kept the first for --revert, a config that does not come up
rolled back, --dry-run changing nothing, an unknown label listing the sweep's; process kind
prints the exact command."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ddtune.cli import main

FAULT_SERVER = Path(__file__).parents[1] / "services" / "fake_fault_server.py"
UNIT = "fake-llm.service"
CONFIGS = """
    [[configs]]
    mode = "ddtree"
    budget = 4
    topk = 2
    [[configs]]
    mode = "ddtree"
    budget = 8
    topk = 2
    [[configs]]          # the fake server exits 2 on `--ready-delay bogus`
    mode = "ddtree"
    budget = 16
    topk = 2
    vars = { delay = "bogus" }
"""


@pytest.fixture
def swept(tmp_path, fake_systemd, fake_spec_writer, port):
    """A finished sweep of UNIT (its own ExecStart serves `ar`); yields (store, root)."""
    root, install_unit = fake_systemd
    own = "TimeoutStopSec=2\nRestart=on-failure\n"  # production's restart policy
    install_unit(UNIT, f"{sys.executable} -S {FAULT_SERVER} --port {port} --mode ar", own)
    service = f'control = "systemd"\nunit = "{UNIT}"\nsystemd_dir = "{root / "run"}"\n'
    spec = fake_spec_writer(tmp_path, "applyme", CONFIGS, port, service)
    store = tmp_path / "s" / "store.sqlite"
    assert main(["sweep", "run", str(spec), "--store", str(store)]) == 1  # the bogus one failed
    assert restart_policy() == "on-failure"  # restored: the trials' Restart=no is gone
    yield store, root
    subprocess.run(["systemctl", "stop", UNIT], check=True)


def apply(store: Path, *args: str) -> int:
    return main(["sweep", "apply", "--store", str(store), *args])


def serving(port: int) -> dict:
    return httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=5).json()["config"]


def restart_policy() -> str:
    """The unit's Restart= as systemd has it loaded now."""
    return subprocess.run(
        ["systemctl", "show", UNIT, "--property=Restart", "--value"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def invocation() -> str:
    out = subprocess.run(
        ["systemctl", "show", UNIT, "--property=InvocationID,ActiveState"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    props = dict(line.split("=", 1) for line in out.splitlines())
    assert props["ActiveState"] == "active", props
    return props["InvocationID"]


def test_applied_ready_reapplied_and_reverted_step_by_step(swept, port, capsys):
    store, root = swept
    dropin = root / "units" / f"{UNIT}.d" / "ddtune-applied.conf"
    assert apply(store, "--config", "ddtree b4 k2 wnone") == 0
    err = " ".join(capsys.readouterr().err.split())
    assert f"applied ddtree b4 k2 wnone to {UNIT}: READY in" in err and str(dropin) in err
    text = dropin.read_text()
    assert '"--budget" "4"' in text and "DDTUNE_INSTANCE_TAG" not in text  # not a sweep's
    assert serving(port)["budget"] == 4
    assert restart_policy() == "on-failure"  # the applied config runs under the unit's policy
    assert not (root / "run" / f"{UNIT}.d" / "ddtune.conf").exists()  # no hold left
    first = invocation()

    assert apply(store, "--config", "ddtree b8 k2 wnone", "--dry-run") == 0
    assert "would write" in capsys.readouterr().err and dropin.read_text() == text
    assert invocation() == first and serving(port)["budget"] == 4

    assert apply(store, "--config", "ddtree b8 k2 wnone") == 0
    assert serving(port)["budget"] == 8 and invocation() != first
    assert dropin.with_name("ddtune-applied.conf.previous").read_text() == text

    assert apply(store, "--revert") == 0  # back to the first apply, verified by its config
    assert "to the previous applied config: READY" in " ".join(capsys.readouterr().err.split())
    assert dropin.read_text() == text and serving(port)["budget"] == 4
    assert apply(store, "--revert") == 0  # back to the unit's own configuration
    assert not dropin.parent.exists() and serving(port)["mode"] == "ar"
    assert restart_policy() == "on-failure"
    assert apply(store, "--revert") == 0
    assert "nothing to revert" in capsys.readouterr().err


def test_a_config_that_does_not_come_up_is_rolled_back(swept, port, capsys):
    store, root = swept
    assert apply(store, "--config", "ddtree b5") == 2  # not one of the sweep's: listed
    err = capsys.readouterr().err
    assert "'ddtree b5' is not a config of sweep 'applyme'" in err and "'ddtree b4 k2 wnone'" in err
    assert apply(store, "--config", "ddtree b16 k2 wnone delay=bogus") == 1
    err = " ".join(capsys.readouterr().err.split())
    # the unit's Restart=on-failure was held off while the crash was proved: one start,
    # seen crashing with its own exit code, not restarted by systemd behind the proof
    assert "not READY: crashed(2)" in err
    assert "rolled back: " in err and "the service is READY" in err
    assert not (root / "units" / f"{UNIT}.d").exists()  # as it was before
    assert not (root / "run" / f"{UNIT}.d" / "ddtune.conf").exists()  # the hold is gone
    assert restart_policy() == "on-failure" and serving(port)["mode"] == "ar"


def test_process_kind_prints_the_exact_launch_command(tmp_path, fake_spec_writer, port, capsys):
    spec = fake_spec_writer(tmp_path, "proc", CONFIGS.split("[[configs]]          #")[0], port)
    store = tmp_path / "p" / "store.sqlite"
    assert main(["sweep", "run", str(spec), "--store", str(store)]) == 0
    capsys.readouterr()
    assert apply(store, "--config", "ddtree b8 k2 wnone") == 0
    err = capsys.readouterr().err
    assert "ddtune keeps nothing running" in err
    command = err.split("serve it with:\n", 1)[1].strip()
    assert command.startswith(f"{sys.executable} -S {FAULT_SERVER} --port {port} --mode ddtree")
    assert "--budget 8 --topk 2 --window none --ready-delay 0" in command
    assert apply(store, "--revert") == 0 and "nothing to revert" in capsys.readouterr().err


def test_hot_kind_applies_in_place_and_reverts_to_the_previous_config(
    tmp_path, fake_spec_writer, port, capsys
):
    configs = CONFIGS.split("[[configs]]          #")[0]
    spec = fake_spec_writer(tmp_path, "hot", configs, port, 'control = "hot"\nengine = "ddtune"\n')
    spec.write_text(spec.read_text().replace('"{delay}"]', '"{delay}", "--hot"]'))
    store = tmp_path / "h" / "store.sqlite"
    assert main(["sweep", "run", str(spec), "--store", str(store)]) == 0
    assert apply(store, "--config", "ddtree b8 k2 wnone") == 2  # no server runs now
    assert "no ddtune server answers" in capsys.readouterr().err
    server = subprocess.Popen(
        [sys.executable, "-S", str(FAULT_SERVER), "--port", str(port), "--budget", "5", "--hot"]
    )
    try:
        wait_ready(port)
        assert apply(store, "--config", "ddtree b8 k2 wnone") == 0
        assert serving(port)["budget"] == 8
        assert apply(store, "--revert") == 0
        assert serving(port)["budget"] == 5 and "in place: READY" in capsys.readouterr().err
        assert server.poll() is None  # the same server throughout
    finally:
        server.kill()
        server.wait()


def wait_ready(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"nothing healthy on port {port}")
