"""`control = "systemd"`: a unit reconfigured through a runtime drop-in, stopped then started.

The render step writes `<systemd_dir>/<unit>.d/ddtune.conf` (the rendered `env`
table and the instance tag as `Environment=`, the rendered `command` as
`ExecStart=` after the empty reset line, and `Restart=no` with an empty
`RestartForceExitStatus=`: systemd never starts a trial again on its own, whatever
the unit's `Restart=` says, so a crash is the trial's result and every start is
ddtune's; the unit's own policy, read with `systemctl show`, is named in the
drop-in's comment and is back as soon as the drop-in is removed), runs `daemon-reload`, checks
`NeedDaemonReload=no` and runs `reset-failed` (which also clears a
start-limit-hit). Then `systemctl stop` and `systemctl start`, never
`restart`. Identity is InvocationID + MainPID + its start time; logs come from
`journalctl _SYSTEMD_INVOCATION_ID=<id>`. close() removes the drop-in.
See docs/readiness.md "Services".
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ddtune.services.procs as procs
from ddtune.engines import Launch
from ddtune.params import DecodeParams
from ddtune.services.controllers.process import scope_prefix
from ddtune.services.gpu import GpuProbe
from ddtune.services.outcome import PhaseFailure, classify_exit, tail_lines
from ddtune.services.protocol import Attempt, Controller
from ddtune.services.session import Baseline, Before, restored_line, stopped_line
from ddtune.services.spec import ServiceSpec

SHOW_PROPS = (
    "NeedDaemonReload,ActiveState,MainPID,InvocationID,Result,ExecMainStatus,ExecMainCode,"
    "ControlGroup,LoadState"
)
CTL_TIMEOUT_S = 60.0
ALIVE_CHECK_INTERVAL_S = 0.5  # `systemctl show` at most twice a second while polling


def unit_name(unit: str) -> str:
    return unit if "." in unit else unit + ".service"


@dataclass(frozen=True)
class UnitSettings:
    """What a unit's own configuration says about where its command runs."""

    user: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    working_directory: str = ""
    fragment_path: str = ""  # the unit file; its drop-in folder is `<fragment_path>.d`


def unit_settings(unit: str) -> UnitSettings:
    """`systemctl show` of User, Environment, WorkingDirectory and FragmentPath."""
    props = "User,Environment,WorkingDirectory,FragmentPath"
    try:
        out = subprocess.run(
            ["systemctl", "show", unit_name(unit), f"--property={props}"],
            capture_output=True,
            text=True,
            timeout=CTL_TIMEOUT_S,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return UnitSettings()
    values = properties(out)
    env = dict(
        item.split("=", 1) for item in shlex.split(values.get("Environment", "")) if "=" in item
    )
    return UnitSettings(
        values.get("User", ""),
        env,
        values.get("WorkingDirectory", ""),
        values.get("FragmentPath", ""),
    )


def trial_dropin(spec: ServiceSpec) -> Path:
    """Where a sweep's trials put their runtime drop-in (removed when the sweep ends)."""
    return Path(spec.systemd_dir) / f"{unit_name(spec.unit or '')}.d" / "ddtune.conf"


def properties(show_output: str) -> dict[str, str]:
    """`systemctl show` output (`Key=value` lines) as a dict."""
    return dict(line.split("=", 1) for line in show_output.splitlines() if "=" in line)


def quote_arg(arg: str) -> str:
    """Quote one word for ExecStart=/Environment= (systemd.syntax: escape \\ and \", double % and $)."""
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'"{escaped}"'


TRIAL_HEADER = "# Written by ddtune for one sweep trial; removed when the sweep ends."
# systemd never restarts a trial on its own: `Restart=no`, and an empty list of exit
# codes that would force a restart whatever `Restart=` says (systemd.service(5))
TRIAL_POLICY = ("Restart=no", "RestartForceExitStatus=")


def restart_policy(unit: str) -> str:
    """The unit's own `Restart=` as systemd has it loaded ("" where it cannot be read)."""
    try:
        done = subprocess.run(
            ["systemctl", "show", unit_name(unit), "--property=Restart", "--value"],
            capture_output=True,
            text=True,
            timeout=CTL_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def trial_policy(own: str) -> list[str]:
    """The trial drop-in's restart lines, with a comment naming the unit's own policy."""
    said = f"The unit's own Restart={own}" if own else "The unit's own restart policy"
    return [
        f"# {said} is off while a trial runs: systemd never starts a trial again on its",
        "# own (a crash is the trial's result); removing this file brings it back.",
        *TRIAL_POLICY,
    ]


def render_dropin(
    env: dict[str, str],
    argv: list[str] | None,
    header: str = TRIAL_HEADER,
    policy: list[str] | None = None,
) -> str:
    """A drop-in: `header` (comment lines), then [Service] with the restart `policy` lines
    (a trial's: `trial_policy`; none: the unit's own), env and ExecStart."""
    lines = [header, "[Service]", *(policy or [])]
    lines += [f"Environment={quote_arg(f'{k}={v}')}" for k, v in env.items()]
    if argv:
        lines += [
            "ExecStart=",
            "ExecStart=" + " ".join(quote_arg(a.replace("$", "$$")) for a in argv),
        ]
    return "\n".join(lines) + "\n"


class SystemdController(Controller):
    """Drive one systemd unit; see the module docstring."""

    def __init__(self, spec: ServiceSpec, workdir: Path, gpu_probe: GpuProbe | None = None) -> None:
        super().__init__(spec, workdir, gpu_probe)
        self.unit = unit_name(spec.unit or "")
        self.dropin = trial_dropin(spec)
        self.tag_prefix = scope_prefix(self.workdir)
        self._tag: str | None = None
        self._argv: list[str] | None = None
        self._ident: dict[str, Any] = {}
        self._cgroup = ""
        self._last_alive_check = 0.0
        self._old_main: procs.ProcInfo | None = None
        self._own_config = False  # restoring: the unit's own configuration, no trial drop-in
        self._own_restart: str | None = None  # the unit's Restart=, read at the first render

    def systemctl(
        self, *args: str, timeout: float = CTL_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                ["systemctl", *args], capture_output=True, text=True, timeout=timeout
            )
        except FileNotFoundError:
            raise PhaseFailure("render_failed", "systemctl not found on PATH") from None

    def show(self) -> dict[str, str]:
        return properties(self.systemctl("show", self.unit, f"--property={SHOW_PROPS}").stdout)

    def seen_before(self) -> Before:
        """Was the unit active (or activating) before the sweep?"""
        try:
            return Before(self.show().get("ActiveState") in ("active", "activating"))
        except PhaseFailure:  # no systemctl here: the first trial's render step says so
            return Before(False)

    def restore(self, before: Before, baseline: Baseline | None) -> str:
        """The unit was active: the trial drop-in removed and the unit started on its own
        configuration (its unit file and persistent drop-ins, a `sweep apply` included)
        through the full readiness protocol; it was inactive: left stopped."""
        notes = self.close()
        if not before.serving:
            return stopped_line(notes)
        self._own_config = True  # `dropin_for` renders none
        try:
            outcome = self.reconfigure(
                DecodeParams("ar"), self.workdir / "restore", verify_config=False
            )
        finally:
            self._own_config = False
        done = f"{self.unit} is back on its own configuration (the sweep's drop-in removed)"
        return restored_line(outcome, done)

    def render(self, attempt: Attempt) -> None:
        self._write_dropin(self.dropin_for(attempt))
        self.systemctl("daemon-reload")
        props = self.show()
        if props.get("LoadState") != "loaded":
            self.release()
            raise PhaseFailure(
                "render_failed", f"systemd unit {self.unit} is not loaded (check service.unit)"
            )
        need = props.get("NeedDaemonReload")
        if need != "no":
            raise PhaseFailure(
                "render_failed",
                f"NeedDaemonReload={need} after daemon-reload; the drop-in would be ignored",
            )
        self.systemctl("reset-failed", self.unit)

    def dropin_for(self, attempt: Attempt) -> str | None:
        """The drop-in that serves `attempt` (None: none, the unit's own configuration after
        a sweep); a trial's carries its tag."""
        if self._own_config:
            self._argv = None
            return None
        self._tag = self.tag_prefix + uuid.uuid4().hex[:12]
        params, user_vars = attempt.params, attempt.user_vars
        self._argv = self.spec.render_argv(params, user_vars) if self.spec.command else None
        env = {**self.spec.render_env(params, user_vars), **self.instance_env(self._tag)}
        if self._own_restart is None:  # read before any trial drop-in is in place
            self._own_restart = restart_policy(self.unit) if not self.dropin.exists() else ""
        return render_dropin(env, self._argv, policy=trial_policy(self._own_restart))

    def _write_dropin(self, text: str | None) -> None:
        try:
            if text is None:
                self.dropin.unlink(missing_ok=True)
            else:
                self.dropin.parent.mkdir(parents=True, exist_ok=True)
                self.dropin.write_text(text)
        except OSError as exc:
            raise PhaseFailure(
                "render_failed", f"cannot write drop-in {self.dropin}: {exc}"
            ) from None

    def snapshot(self) -> dict[str, Any]:
        """Remember the unit's cgroup and main process (it may predate our tag) before stopping."""
        props = self.show()
        self._cgroup = props.get("ControlGroup", "") or self._cgroup
        main = int(props.get("MainPID") or 0)
        self._old_main = procs.process_info(main) if main else None
        snap = super().snapshot()
        snap.update(invocation_id=props.get("InvocationID"), main_pid=main)
        return snap

    def our_processes(self) -> list[procs.ProcInfo]:
        """Tagged processes, the unit's cgroup, and the main process seen at the snapshot."""
        found = {
            p.pid: p
            for p in procs.find_instance(
                tag=self.tag_prefix, tag_prefix=True, pids=tuple(_cgroup_pids(self._cgroup))
            )
        }
        old = self._old_main
        if old is not None and old.pid not in found and old.alive():
            found[old.pid] = old
        return list(found.values())

    def stop_command(self) -> None:
        timeout = self.spec.timeouts.stop + self.spec.timeouts.quiesce
        try:
            self.systemctl("stop", self.unit, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise PhaseFailure(
                "timeout:stop", f"systemctl stop {self.unit} did not return in {timeout:.0f}s"
            ) from None

    def start(self, attempt: Attempt) -> dict[str, Any]:
        try:
            done = self.systemctl("start", self.unit, timeout=self.spec.timeouts.start)
        except subprocess.TimeoutExpired:
            raise PhaseFailure(
                "timeout:start", f"systemctl start {self.unit} did not return"
            ) from None
        props = self.show()
        self._cgroup = props.get("ControlGroup", "") or self._cgroup
        self._ident = {
            "unit": self.unit,
            "invocation_id": props.get("InvocationID"),
            "main_pid": int(props.get("MainPID") or 0),
            "tag": self._tag,
        }
        if done.returncode != 0:
            result = props.get("Result", "")
            if result == "start-limit-hit":
                raise PhaseFailure("start_failed(start-limit-hit)", done.stderr.strip())
            tail = tail_lines(self.write_logs(attempt.attempt_dir), 40)
            raise PhaseFailure(
                classify_exit(_exit_code(props), tail),
                f"systemctl start failed: {done.stderr.strip()}",
            )
        info = procs.process_info(self._ident["main_pid"]) if self._ident["main_pid"] else None
        if info is not None:
            self._ident["pid"] = info.pid
            self._ident["create_time"] = info.create_time
        return dict(self._ident)

    def exit_code(self) -> tuple[bool, int | None]:
        if not self._ident or time.monotonic() - self._last_alive_check < ALIVE_CHECK_INTERVAL_S:
            return False, None
        self._last_alive_check = time.monotonic()
        props = self.show()
        same = (
            props.get("InvocationID") == self._ident["invocation_id"]
            and int(props.get("MainPID") or 0) == self._ident["main_pid"]
        )
        if props.get("ActiveState") in ("active", "activating", "reloading") and same:
            return False, None
        if props.get("Result") == "oom-kill":
            return True, -9
        return True, _exit_code(props)

    def instance_pids(self) -> set[int] | None:
        main = self._ident.get("main_pid") or 0
        pids = tuple(_cgroup_pids(self._cgroup)) + ((main,) if main else ())
        return {
            p.pid
            for p in procs.find_instance(tag=self._tag, pids=pids, pgids=(main,) if main else ())
        }

    def launch(self) -> Launch:
        return Launch(main_pid=self._ident.get("main_pid") or None, argv=self._argv)

    def write_logs(self, attempt_dir: Path) -> Path | None:
        inv = self._ident.get("invocation_id")
        selector = [f"_SYSTEMD_INVOCATION_ID={inv}"] if inv else ["-u", self.unit, "-n", "200"]
        try:
            text = subprocess.run(
                ["journalctl", *selector, "-o", "cat", "--no-pager"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        path = attempt_dir / "service.log"
        path.write_text(text)
        return path

    def release(self) -> None:
        """Remove the drop-in and reload, so the unit runs its own configuration again."""
        if self.dropin.exists():
            self.dropin.unlink()
            with contextlib.suppress(OSError):  # other drop-ins may live there
                self.dropin.parent.rmdir()
            self.systemctl("daemon-reload")
            self.systemctl("reset-failed", self.unit)
        self._ident = {}


def _cgroup_pids(group: str) -> list[int]:
    """PIDs in the unit's cgroup (v2 or the v1 systemd hierarchy); [] when not visible."""
    if not group:
        return []
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/systemd"):
        path = Path(root + group) / "cgroup.procs"
        if path.exists():
            return [int(x) for x in path.read_text().split()]
    return []


def _exit_code(props: dict[str, str]) -> int | None:
    status = int(props.get("ExecMainStatus") or 0)
    return -status if props.get("ExecMainCode") in ("2", "3") else status
