"""Make one configuration a systemd unit's lasting one: a persistent drop-in, proved READY.

    plan = applied_dropin(spec)                   # where: beside the unit, ddtune-applied.conf
    text = dropin_text(spec, params, user_vars, origin)
    outcome = apply_dropin(spec, plan, text, params, user_vars, workdir)   # READY or rolled back
    outcome = revert_dropin(spec, plan, workdir)  # the previous drop-in, or the unit's own config

The sweep's trials use a runtime drop-in that is removed when the sweep ends;
`ddtune sweep apply` writes `<unit dir>/<unit>.d/ddtune-applied.conf` (the
folder of the unit's FragmentPath; /etc/systemd/system for a unit shipped
under /usr or /lib), which survives reboots. The drop-in carries the rendered
`service.env` and `ExecStart=` exactly as a trial's would, but no instance
tag: the applied service is not a sweep's instance, so `ddtune sweep cleanup`
never treats it as a leftover. Nor does it carry a trial's `Restart=no`: the
applied configuration runs under the unit's own restart policy, as production did
before the sweep. While the apply (or its rollback, or `--revert`) proves the
restart READY, a runtime drop-in holds systemd's restarts off as a trial's does
(`<systemd_dir>/<unit>.d/ddtune.conf`: `Restart=no`, `RestartForceExitStatus=`),
so a config that crashes is seen crashing, not restarted behind the proof; it is
removed (and systemd reloaded, which restarts nothing) as soon as the proof ends,
READY or not: the unit's own `Restart=` governs the running service from then on. A drop-in already there is kept as
`ddtune-applied.conf.previous` (systemd reads `*.conf` only) for `--revert`.

Then the full readiness protocol (`PersistentDropin`, a systemd controller
whose render step writes that file): daemon-reload, NeedDaemonReload=no,
reset-failed, stop, quiesce, start, new InvocationID, health, the reported
configuration, generations. Not READY: the drop-in is put back as it was and
the unit restarted through the same protocol (`Rollback.outcome`), so a failed
apply never leaves the service down with a configuration nobody asked for.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.services.controllers.systemd import (
    SystemdController,
    render_dropin,
    restart_policy,
    trial_dropin,
    trial_policy,
    unit_name,
    unit_settings,
)
from ddtune.services.outcome import Outcome, PhaseFailure
from ddtune.services.protocol import Attempt
from ddtune.services.scheduled import FILE_PREFIX as SCHEDULE_FILES
from ddtune.services.spec import ServiceSpec

APPLIED_NAME = "ddtune-applied.conf"
HOLD_HEADER = "# Written by `ddtune sweep apply` while it proves a restart; removed right after."
CONFIG_MARK = "# ddtune-config: "  # the applied config as JSON, for --revert
SHIPPED = ("/usr/", "/lib/")
ADMIN_DIR = Path("/etc/systemd/system")


@dataclass(frozen=True)
class DropinPlan:
    """The persistent drop-in of one unit, and where the previous one is kept."""

    unit: str
    path: Path

    @property
    def previous(self) -> Path:
        return self.path.with_name(APPLIED_NAME + ".previous")

    def would_apply(self, text: str, files: Iterable[Path] = ()) -> list[str]:
        """What `--dry-run` says an apply of `text` (and the `files` its command reads) does."""
        kept = f", keep the present one as {self.previous.name}" if self.path.exists() else ""
        return [
            f"would write {self.path}:\n{text}",
            *(f"and {path}" for path in files),
            f"then daemon-reload, stop and start {self.unit} and wait for READY{kept}",
        ]


@dataclass
class Rollback:
    """A failed apply: what went wrong, and how the restore went."""

    failed: Outcome
    restored: Outcome
    path: Path  # the drop-in, put back as it was
    ready = False

    def said(self) -> list[str]:
        """What the user is told: the failure (and its log), then the restored service."""
        failed, restored = self.failed, self.restored
        log = [f"  log: {failed.log_path}"] if failed.log_path else []
        state = "READY" if restored.ready else f"NOT READY ({restored.failure}: {restored.detail})"
        return [
            f"not READY: {failed.failure} — {failed.detail}",
            *log,
            f"rolled back: {self.path} as it was before; the service is {state}",
        ]


def applied_dropin(spec: ServiceSpec) -> DropinPlan:
    """`<the unit file's folder>/<unit>.d/ddtune-applied.conf` (see the module docstring)."""
    unit = unit_name(spec.unit or "")
    fragment = unit_settings(unit).fragment_path
    if not fragment:
        raise UserError(f"systemd knows no unit {unit} (no FragmentPath): check service.unit")
    folder = Path(fragment).parent
    if str(folder).startswith(SHIPPED) or str(folder).startswith(spec.systemd_dir):
        folder = ADMIN_DIR
    return DropinPlan(unit, folder / f"{unit}.d" / APPLIED_NAME)


def refuse_during_sweep(spec: ServiceSpec, plan: DropinPlan) -> None:
    """Refused while a sweep's runtime drop-in is on the unit (a sweep runs, or a killed one
    left it): an apply would restart the unit under the sweep."""
    runtime = trial_dropin(spec)
    if runtime.exists():
        raise UserError(
            f"{runtime} exists: a sweep runs on {plan.unit} now (or a killed one left it; "
            "`ddtune sweep cleanup`); apply after it"
        )


def dropin_text(
    spec: ServiceSpec,
    params: DecodeParams,
    user_vars: Mapping[str, Any],
    origin: str,
    argv: list[str] | None = None,
) -> str:
    """The drop-in: a header saying where it came from, the config as JSON, env and ExecStart
    (`argv`: a command other than the config's own, e.g. a schedule's; kept for --revert)."""
    data: dict[str, Any] = {"params": params.to_wire(), "vars": dict(user_vars)}
    if argv is not None:
        data["argv"] = argv
    else:
        argv = spec.render_argv(params, user_vars) if spec.command else None
    config = json.dumps(data, sort_keys=True)
    head = (
        f"# Written by `ddtune sweep apply` ({origin}); `--revert` restores.\n{CONFIG_MARK}{config}"
    )
    return render_dropin(spec.render_env(params, user_vars), argv, header=head)


def applied_config(text: str) -> tuple[DecodeParams, dict[str, Any]] | None:
    """The config a drop-in written by `dropin_text` applies; None for any other file."""
    for line in text.splitlines():
        if line.startswith(CONFIG_MARK):
            data = json.loads(line[len(CONFIG_MARK) :])
            return DecodeParams.from_wire(data["params"]), dict(data["vars"])
    return None


def applied_argv(text: str) -> list[str] | None:
    """The command a drop-in written by `dropin_text` with its own `argv` runs; else None."""
    for line in text.splitlines():
        if line.startswith(CONFIG_MARK):
            argv = json.loads(line[len(CONFIG_MARK) :]).get("argv")
            return [str(a) for a in argv] if isinstance(argv, list) else None
    return None


class PersistentDropin(SystemdController):
    """The systemd protocol with `text` as the unit's persistent drop-in at `path` (no tag);
    `argv`: the command it runs when that is not the config's own (a schedule's)."""

    def __init__(
        self,
        spec: ServiceSpec,
        workdir: Path,
        path: Path,
        text: str | None,
        argv: list[str] | None = None,
    ) -> None:
        super().__init__(spec, workdir, None)
        self.dropin, self.text, self.argv = path, text, argv

    def dropin_for(self, attempt: Attempt) -> str | None:
        """`text` (None: the applied drop-in is removed, as `--revert` does); systemd's
        restarts held off while this start is proved (`hold_restarts`)."""
        own = self.spec.render_argv(attempt.params, attempt.user_vars)
        self._argv = (self.argv or own) if self.text else None
        self.hold_restarts()
        return self.text

    def hold_restarts(self) -> None:
        """A runtime drop-in with a trial's restart lines, the unit's own policy named."""
        hold = trial_dropin(self.spec)
        if hold.exists():
            return
        text = render_dropin(
            {}, None, header=HOLD_HEADER, policy=trial_policy(restart_policy(self.unit))
        )
        try:
            hold.parent.mkdir(parents=True, exist_ok=True)
            hold.write_text(text)
        except OSError as exc:
            raise PhaseFailure("render_failed", f"cannot write drop-in {hold}: {exc}") from None

    def release(self) -> None:
        """The applied drop-in stays (it is the service's configuration now); the hold on
        restarts goes, and systemd reloads (restarting nothing): the unit's policy is back."""
        hold = trial_dropin(self.spec)
        if hold.exists() and hold.read_text().startswith(HOLD_HEADER):
            hold.unlink()
            _remove_empty(hold.parent)
            self.systemctl("daemon-reload")
        self._ident = {}


def apply_dropin(
    spec: ServiceSpec,
    plan: DropinPlan,
    text: str,
    params: DecodeParams,
    user_vars: Mapping[str, Any],
    workdir: Path,
    argv: list[str] | None = None,
    files: Mapping[Path, str] | None = None,
) -> Outcome | Rollback:
    """Write the drop-in (and the `files` its command reads, e.g. a schedule) and restart the
    unit through the readiness protocol; roll back if it does not become READY."""
    before = plan.path.read_text() if plan.path.exists() else None
    if before is not None:
        plan.previous.write_text(before)
    for path, content in (files or {}).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    controller = PersistentDropin(spec, workdir, plan.path, text, argv)
    try:
        outcome = controller.reconfigure(params, workdir / "apply", user_vars=user_vars)
    finally:
        controller.release()  # the unit's own restart policy, READY or not
    if outcome.ready:
        return outcome
    return Rollback(outcome, _restore(spec, plan, before, workdir / "rollback"), plan.path)


def applied_said(result: Outcome | Rollback, plan: DropinPlan, what: str) -> list[str]:
    """What the user is told of an apply of `what` (a config's label, "the schedule")."""
    if isinstance(result, Rollback):
        return result.said()
    return [
        f"applied {what} to {plan.unit}: READY in "
        f"{result.timings.get('start_to_ready_s', 0):.1f} s "
        f"(InvocationID {result.identity.get('invocation_id')}); drop-in {plan.path}"
    ]


def apply_lasting(
    spec: ServiceSpec,
    params: DecodeParams,
    user_vars: Mapping[str, Any],
    origin: str,
    workdir: Path,
    what: str,
    dry_run: bool,
    argv: list[str] | None = None,
    files: Mapping[Path, str] | None = None,
) -> tuple[list[str], int]:
    """`sweep apply` on systemd, end to end: refused while a sweep runs on the unit; with
    `dry_run`, what it would write; else the drop-in applied (`apply_dropin`). The lines to
    print and the exit code."""
    plan = applied_dropin(spec)
    refuse_during_sweep(spec, plan)
    text = dropin_text(spec, params, user_vars, origin, argv=argv)
    if dry_run:
        return plan.would_apply(text, files or {}), 0
    folder = workdir / "apply" / plan.unit
    result = apply_dropin(spec, plan, text, params, user_vars, folder, argv, files)
    return applied_said(result, plan, what), 0 if result.ready else 1


def revert_dropin(spec: ServiceSpec, plan: DropinPlan, workdir: Path) -> Outcome:
    """Put the previous applied drop-in back (or none: the unit's own configuration)."""
    if not plan.path.exists():
        raise UserError(f"nothing to revert: {plan.path} does not exist")
    before = plan.previous.read_text() if plan.previous.exists() else None
    outcome = _restore(spec, plan, before, workdir / "revert")
    if outcome.ready:
        plan.previous.unlink(missing_ok=True)
    return outcome


def _restore(spec: ServiceSpec, plan: DropinPlan, text: str | None, workdir: Path) -> Outcome:
    """`text` as the drop-in (None: removed), READY by its own config or, without one,
    by health, a new instance and generations."""
    known = applied_config(text) if text is not None else None
    params, user_vars = known or (DecodeParams("ar"), {})
    argv = applied_argv(text) if text is not None else None
    controller = PersistentDropin(spec, workdir, plan.path, text, argv)
    try:
        outcome = controller.reconfigure(
            params, workdir, user_vars=user_vars, verify_config=known is not None
        )
    finally:
        controller.release()
    if text is None:
        for stale in plan.path.parent.glob(f"{SCHEDULE_FILES}*.json"):
            stale.unlink(missing_ok=True)
        _remove_empty(plan.path.parent)
    return outcome


def _remove_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # other drop-ins live there
        folder.rmdir()


__all__ = [
    "APPLIED_NAME",
    "DropinPlan",
    "PersistentDropin",
    "Rollback",
    "applied_argv",
    "applied_config",
    "applied_dropin",
    "applied_said",
    "apply_dropin",
    "apply_lasting",
    "dropin_text",
    "refuse_during_sweep",
    "revert_dropin",
]
