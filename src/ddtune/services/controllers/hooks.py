"""`control = "hooks"`: user shell commands stop/start/logs (docker, Kubernetes, Slurm, ...).

Each hook runs under `/bin/sh -c` with the configuration as environment
variables: `DDTUNE_MODE, DDTUNE_BUDGET, DDTUNE_TOPK, DDTUNE_WINDOW, DDTUNE_PORT,
DDTUNE_HOST`, one `DDTUNE_<VAR>` per user variable, the rendered `env` table,
`DDTUNE_ATTEMPT_DIR` and the instance tag. The start hook must return once the
server is launched (e.g. `docker run -d`). Local processes it leaves behind
carry the tag, so they are found, watched and killed like a process control's;
remote ones are judged by the port and the engine's probes only.
See docs/readiness.md "Services".
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import ddtune.services.procs as procs
from ddtune.errors import UserError
from ddtune.services.controllers.process import scope_prefix
from ddtune.services.gpu import GpuProbe
from ddtune.services.outcome import PhaseFailure
from ddtune.services.protocol import Attempt, Controller
from ddtune.services.session import Baseline, Before, restored_line
from ddtune.services.spec import ServiceSpec

LOGS_HOOK_TIMEOUT_S = 60.0


class HooksController(Controller):
    """Run the user's hooks; see the module docstring."""

    foreign_port_final = False  # a hook's server (docker-proxy, a remote node) is not tagged

    def __init__(self, spec: ServiceSpec, workdir: Path, gpu_probe: GpuProbe | None = None) -> None:
        if spec.hooks.start is None or spec.hooks.stop is None:
            raise UserError("control = 'hooks' needs service.hooks.start and service.hooks.stop")
        super().__init__(spec, workdir, gpu_probe)
        self.start_hook, self.stop_hook = spec.hooks.start, spec.hooks.stop
        self.tag_prefix = scope_prefix(self.workdir)
        self._env: dict[str, str] = {}
        self._old_env: dict[str, str] = {}
        self._tag: str | None = None
        self._had_local = False
        self._hooks_log: Path | None = None

    def restore(self, before: Before, baseline: Baseline | None) -> str:
        """ddtune cannot read the configuration a hooks service had: one that served before
        the sweep gets `[sweep] baseline` from the start hook, checked READY; without a
        baseline it is left stopped and the line says so."""
        if not before.serving:
            return super().restore(before, baseline)
        self.close()
        if baseline is None:
            return (
                "the service is stopped: it served before the sweep, but a hooks service's own "
                "configuration is unknown to ddtune and the spec has no [sweep] baseline; start "
                "it as you normally do"
            )
        outcome = self.reconfigure(
            baseline.params, self.workdir / "restore", user_vars=baseline.user_vars()
        )
        return restored_line(outcome, f"the start hook serves the baseline {baseline.label()}")

    def render(self, attempt: Attempt) -> None:
        self._old_env = self._env or {}
        self._tag = self.tag_prefix + uuid.uuid4().hex[:12]
        self._env = {
            **self.spec.hook_env(attempt.params, attempt.user_vars),
            "DDTUNE_ATTEMPT_DIR": str(attempt.attempt_dir),
            **self.instance_env(self._tag),
        }
        self._hooks_log = attempt.attempt_dir / "hooks.log"

    def run_hook(
        self, name: str, command: str, timeout: float, env: dict[str, str] | None = None
    ) -> int:
        """Run one hook with its output appended to hooks.log; raise timeout:<name> if it hangs."""
        log_path = self._hooks_log or self.workdir / "hooks.log"
        with open(log_path, "a") as log:
            log.write(f"--- {name} hook: {command}\n")
            log.flush()
            proc = subprocess.Popen(
                ["/bin/sh", "-c", command],
                env={**os.environ, **(env or self._env)},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.spec.cwd or self.workdir,
            )
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                procs.terminate(
                    lambda: procs.find_instance(pgids=(proc.pid,)), grace=2.0, kill_wait=5.0
                )
                proc.wait()
                raise PhaseFailure(
                    f"timeout:{name}", f"the {name} hook did not return in {timeout:.0f}s"
                ) from None
            log.write(f"--- {name} hook exited with {code}\n")
        return code

    def our_processes(self) -> list[procs.ProcInfo]:
        return procs.find_instance(tag=self.tag_prefix, tag_prefix=True)

    def stop_command(self) -> None:
        env = {**self._env, **self._old_env} if self._old_env else self._env
        timeout = self.spec.timeouts.stop + self.spec.timeouts.quiesce
        self.run_hook("stop", self.stop_hook, timeout, env or None)

    def start(self, attempt: Attempt) -> dict[str, Any]:
        code = self.run_hook("start", self.start_hook, self.spec.timeouts.start)
        if code != 0:
            raise PhaseFailure(
                f"start_failed({code})", f"the start hook exited with {code}; see hooks.log"
            )
        local = procs.find_instance(tag=self._tag)
        self._had_local = bool(local)
        return {"tag": self._tag, "local_pids": sorted(p.pid for p in local)}

    def exit_code(self) -> tuple[bool, int | None]:
        """Only local servers can be watched: dead when every tagged process is gone."""
        if not self._had_local or self._tag is None:
            return False, None
        return (not procs.find_instance(tag=self._tag)), None

    def write_logs(self, attempt_dir: Path) -> Path | None:
        """service.log = the hooks' own output, then the logs hook's output."""
        path = attempt_dir / "service.log"
        hooks_text = (
            self._hooks_log.read_text(errors="replace")
            if self._hooks_log and self._hooks_log.exists()
            else ""
        )
        logs_text = ""
        if self.spec.hooks.logs is not None:
            try:
                logs_text = subprocess.run(
                    ["/bin/sh", "-c", self.spec.hooks.logs],
                    env={**os.environ, **self._env},
                    capture_output=True,
                    text=True,
                    timeout=LOGS_HOOK_TIMEOUT_S,
                ).stdout
            except subprocess.TimeoutExpired:
                logs_text = "(the logs hook timed out)\n"
        path.write_text(hooks_text + "--- logs hook output\n" + logs_text)
        return path
