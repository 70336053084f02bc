"""Systemd controller against FAKE systemctl/journalctl (and real systemd where it runs)."""

from __future__ import annotations

import functools
import os
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from ddtune.services.controllers.systemd import TRIAL_POLICY, render_dropin, trial_policy

UNIT = "fake-llm.service"


def systemd_spec(svc, port, root, *switches, unit=UNIT, **overrides):
    cmd = svc.fault_command(*switches)
    return svc.make_spec(
        port, cmd, control="systemd", unit=unit, systemd_dir=str(root / "run"), **overrides
    )


def test_dropin_rendering_quotes_and_resets_execstart():
    text = render_dropin({"A": 'x "y" 50%'}, ["/bin/srv", "--name", "a b", "$HOME"])
    assert 'Environment="A=x \\"y\\" 50%%"' in text
    assert 'ExecStart=\nExecStart="/bin/srv" "--name" "a b" "$$HOME"' in text


def stop_start_through_dropin_where_restart_would_lie(
    svc, controllers, tmp_path, root, install_unit
):
    unit, port = "restart-trap.service", svc.free_port()
    install_unit(unit, "/bin/false")
    switches = ("--ready-delay", "1", "--linger-after-term", "0.5")
    ctl = controllers(systemd_spec(svc, port, root, *switches, unit=unit))
    first = ctl.reconfigure(svc.params, tmp_path / "a1")
    assert first.ready, first
    dropin = root / "run" / f"{unit}.d" / "ddtune.conf"
    assert "ExecStart=\n" in dropin.read_text() and "DDTUNE_INSTANCE_TAG=" in dropin.read_text()

    subprocess.run(["systemctl", "restart", unit], check=True)  # what the old shell loop did
    health = None
    for _ in range(100):  # the new process needs a moment to bind; then it says "loading"
        try:
            health = httpx.get(f"http://127.0.0.1:{port}/health_generate", timeout=1).status_code
            break
        except httpx.HTTPError:
            time.sleep(0.05)
    assert health == 503, "restart returned before the service was ready"

    second = ctl.reconfigure(svc.params.with_updates({"window": 64}), tmp_path / "a2")
    assert second.ready, second
    assert second.identity["invocation_id"] != first.identity["invocation_id"]
    assert second.identity["config"]["window"] == 64
    assert second.timings["start_to_ready_s"] >= 0.9  # the 1 s load was waited for
    assert second.log_tail.count("ready instance_id=") == 1  # journal of this invocation only
    ctl.close()
    assert not dropin.exists()
    state = subprocess.run(["systemctl", "is-active", unit], capture_output=True, text=True)
    assert state.stdout.strip() == "inactive"


def crash_is_classified_and_start_limit_is_reset(svc, controllers, tmp_path, root, install_unit):
    unit, port = "crashing.service", svc.free_port()
    install_unit(
        unit, "/bin/false", extra="TimeoutStopSec=2\nStartLimitBurst=3\nStartLimitIntervalSec=300\n"
    )
    switches = ("--crash-during-load", "3", "--crash-after", "0.05")
    crashing = controllers(systemd_spec(svc, port, root, *switches, unit=unit), name="crash")
    out = crashing.reconfigure(svc.params, tmp_path / "a1")
    assert out.failure == "crashed(3)", out
    assert "fake load failure" in out.log_tail
    for _ in range(3):  # keep restarting the crashing unit until systemd refuses
        done = subprocess.run(["systemctl", "start", unit], capture_output=True, text=True)
        while subprocess.run(["systemctl", "is-active", unit], capture_output=True).returncode == 0:
            time.sleep(0.05)
    assert done.returncode == 1
    assert (
        subprocess.run(
            ["systemctl", "show", unit, "-p", "Result", "--value"], capture_output=True, text=True
        ).stdout.strip()
        == "start-limit-hit"
    )
    good = controllers(systemd_spec(svc, port, root, unit=unit), name="good")
    assert good.reconfigure(svc.params, tmp_path / "a2").ready  # reset-failed in the render step


SCENARIOS = [
    stop_start_through_dropin_where_restart_would_lie,
    crash_is_classified_and_start_limit_is_reset,
]


@pytest.fixture(scope="module")
def systemd_scenario_errors(svc, common, tmp_path_factory) -> dict[str, BaseException | None]:
    """The two long cases run at once on two units of one FAKE systemd (PATH set for the module)."""
    saved = dict(os.environ)
    root, install_unit = common.setup_fake_systemd(
        tmp_path_factory.mktemp("fake-systemd"), os.environ.__setitem__
    )
    try:
        runs = {
            fn.__name__: functools.partial(fn, svc, root=root, install_unit=install_unit)
            for fn in SCENARIOS
        }
        return svc.run_scenarios({k: _as_scenario(f) for k, f in runs.items()}, tmp_path_factory)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _as_scenario(fn):
    return lambda controllers, tmp_path: fn(controllers=controllers, tmp_path=tmp_path)


@pytest.mark.parametrize("name", [fn.__name__ for fn in SCENARIOS])
def test_systemd_scenario(systemd_scenario_errors, name):
    """Each concurrent scenario passed (its own assertion error is re-raised here)."""
    error = systemd_scenario_errors[name]
    if error is not None:
        raise error


def test_need_daemon_reload_is_a_render_failure(
    svc, port, controllers, tmp_path, fake_systemd, monkeypatch
):
    root, install_unit = fake_systemd
    install_unit(UNIT, "/bin/false")
    monkeypatch.setenv("FAKE_SYSTEMD_BROKEN_RELOAD", "1")
    ctl = controllers(systemd_spec(svc, port, root))
    out = ctl.reconfigure(svc.params, tmp_path / "a")
    assert out.failure == "render_failed" and "NeedDaemonReload=yes" in out.detail, out


def test_exit_status_is_read_once_the_service_manager_has_it(
    svc, port, controllers, tmp_path, fake_systemd, monkeypatch
):
    """A crash is crashed(3) even when the exit is recorded late (CI once read crashed(0))."""
    root, install_unit = fake_systemd
    install_unit(UNIT, "/bin/false")
    monkeypatch.setenv("FAKE_SYSTEMD_REAP_DELAY", "0.5")
    switches = ("--crash-during-load", "3", "--crash-after", "0.05")
    out = controllers(systemd_spec(svc, port, root, *switches)).reconfigure(
        svc.params, tmp_path / "a"
    )
    assert out.failure == "crashed(3)", out


@pytest.mark.skipif(
    not Path("/run/systemd/system").is_dir(),
    reason="real systemd is not running here (no /run/systemd/system)",
)
def test_real_systemd_unit_stop_start(svc, port, controllers, tmp_path):
    unit = f"ddtune-test-{uuid.uuid4().hex[:8]}.service"
    unit_file = Path("/run/systemd/system") / unit
    unit_file.write_text("[Service]\nType=simple\nExecStart=/bin/false\nTimeoutStopSec=5\n")
    subprocess.run(["systemctl", "daemon-reload"], check=True)
    try:
        spec = svc.make_spec(port, svc.fault_command(), control="systemd", unit=unit)
        ctl = controllers(spec)
        first = ctl.reconfigure(svc.params, tmp_path / "a1")
        second = ctl.reconfigure(svc.params, tmp_path / "a2")
        assert first.ready and second.ready, (first, second)
        assert first.identity["invocation_id"] != second.identity["invocation_id"]
        ctl.close()
    finally:
        unit_file.unlink()
        subprocess.run(["systemctl", "daemon-reload"], check=False)


def test_unknown_unit_is_a_render_failure(svc, port, controllers, tmp_path, fake_systemd):
    root, _ = fake_systemd
    ctl = controllers(
        svc.make_spec(
            port, svc.fault_command(), control="systemd", unit="nope", systemd_dir=str(root / "run")
        )
    )
    out = ctl.reconfigure(svc.params, tmp_path / "a")
    assert out.failure == "render_failed" and "nope.service is not loaded" in out.detail, out
    assert not (root / "run" / "nope.service.d" / "ddtune.conf").exists()


def shown(unit: str, prop: str) -> str:
    done = subprocess.run(["systemctl", "show", unit, "-p", prop, "--value"], capture_output=True)
    return done.stdout.decode().strip()


def starts_in(ledger: Path, within_s: float = 1.5) -> int:
    """The starts the FAKE server recorded, once no new one came for `within_s` seconds."""
    count, quiet_since = -1, time.monotonic()
    while time.monotonic() - quiet_since < within_s:
        now = len(ledger.read_text().splitlines()) if ledger.exists() else 0
        if now != count:
            count, quiet_since = now, time.monotonic()
        time.sleep(0.05)
    return count


CRASH = ("--crash-during-load", "3", "--crash-after", "0.05")
ALWAYS = "TimeoutStopSec=2\nRestart=always\nRestartSec=0\nRestartForceExitStatus=3\n"


def test_the_fake_systemd_restarts_a_crashing_unit_as_its_policy_says(
    svc, port, fake_systemd, tmp_path, monkeypatch
):
    """The control: without ddtune's drop-in, Restart=always starts the crash again and again."""
    root, install_unit = fake_systemd
    ledger = tmp_path / "starts.jsonl"
    monkeypatch.setenv("FAKE_COUNT_STARTS", str(ledger))
    argv = [a.replace("{port}", str(port)) for a in svc.fault_command(*CRASH)]
    install_unit(UNIT, " ".join(argv), extra=ALWAYS)
    assert shown(UNIT, "Restart") == "always"
    subprocess.run(["systemctl", "start", UNIT], check=True)
    assert starts_in(ledger) >= 3  # restarted until the start limit (5 in 10 s) stops it
    subprocess.run(["systemctl", "stop", UNIT], check=True)


def test_a_trial_is_never_restarted_by_systemd_and_the_units_policy_comes_back(
    svc, port, controllers, fake_systemd, tmp_path, monkeypatch
):
    """A unit with Restart=always (and an exit code that forces a restart): a trial that
    crashes is one start, the crash is its result; the drop-in names the unit's own policy,
    and once it is removed systemd reports Restart=always again."""
    root, install_unit = fake_systemd
    ledger = tmp_path / "starts.jsonl"
    monkeypatch.setenv("FAKE_COUNT_STARTS", str(ledger))
    install_unit(UNIT, "/bin/false", extra=ALWAYS)
    ctl = controllers(systemd_spec(svc, port, root, *CRASH))
    out = ctl.reconfigure(svc.params, tmp_path / "a")
    assert out.failure == "crashed(3)", out
    assert starts_in(ledger) == 1  # systemd did not start the trial again
    dropin = (root / "run" / f"{UNIT}.d" / "ddtune.conf").read_text()
    assert all(line in dropin.splitlines() for line in TRIAL_POLICY)
    assert "The unit's own Restart=always is off while a trial runs" in dropin
    assert shown(UNIT, "Restart") == "no"
    ctl.close()
    assert shown(UNIT, "Restart") == "always"  # the drop-in gone: the unit's own policy


def test_only_a_trial_drop_in_carries_the_restart_lines():
    trial = render_dropin({}, ["/bin/srv"], policy=trial_policy("on-failure"))
    assert "Restart=no\nRestartForceExitStatus=\n" in trial and "Restart=on-failure" in trial
    applied = render_dropin({}, ["/bin/srv"], header="# applied")
    assert "Restart" not in applied
