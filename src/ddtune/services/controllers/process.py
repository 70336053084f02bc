"""`control = "process"`: the server is a local child process started from an argv.

Each launch gets its own session/process group and the environment tag
`DDTUNE_INSTANCE_TAG=ddtune-<scope>-<uuid>`, where <scope> is derived from the
workdir: every process of every instance this controller ever started (also
after a crash of ddtune itself) is found by the tag prefix, double-forked
orphans included. stdout and stderr go to `<attempt_dir>/service.log`.
See docs/readiness.md "Services".
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import ddtune.services.procs as procs
from ddtune.engines import Launch
from ddtune.services.gpu import GpuProbe
from ddtune.services.outcome import PhaseFailure
from ddtune.services.protocol import Attempt, Controller
from ddtune.services.spec import ServiceSpec


def scope_prefix(workdir: Path) -> str:
    """The tag prefix shared by all instances started for one workdir."""
    digest = hashlib.sha256(str(Path(workdir).resolve()).encode()).hexdigest()[:12]
    return f"ddtune-{digest}-"


class ProcessController(Controller):
    """Start/stop a local process group; see the module docstring."""

    def __init__(self, spec: ServiceSpec, workdir: Path, gpu_probe: GpuProbe | None = None) -> None:
        super().__init__(spec, workdir, gpu_probe)
        self.tag_prefix = scope_prefix(self.workdir)
        self._popen: subprocess.Popen[bytes] | None = None
        self._tag: str | None = None
        self._argv: list[str] = []
        self._env: dict[str, str] = {}
        self._log_path: Path | None = None

    def render(self, attempt: Attempt) -> None:
        self._argv = self.spec.render_argv(attempt.params, attempt.user_vars)
        self._env = self.spec.render_env(attempt.params, attempt.user_vars)
        exe = self._argv[0]
        if not (shutil.which(exe) or (os.sep in exe and os.access(exe, os.X_OK))):
            raise PhaseFailure(
                "render_failed", f"service.command[0] {exe!r} is not an executable on PATH"
            )

    def our_processes(self) -> list[procs.ProcInfo]:
        pgids = (self._popen.pid,) if self._popen else ()
        return procs.find_instance(tag=self.tag_prefix, pgids=pgids, tag_prefix=True)

    def start(self, attempt: Attempt) -> dict[str, Any]:
        self._tag = self.tag_prefix + uuid.uuid4().hex[:12]
        self._log_path = attempt.attempt_dir / "service.log"
        env = {**os.environ, **self._env, **self.instance_env(self._tag)}
        with open(self._log_path, "ab") as log:
            try:
                self._popen = subprocess.Popen(
                    self._argv,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # own session and process group
                    cwd=self.spec.cwd or self.workdir,
                )
            except OSError as exc:
                raise PhaseFailure(
                    "start_failed", f"could not run {self._argv[0]}: {exc}"
                ) from None
        return self._identity()

    def _identity(self) -> dict[str, Any]:
        assert self._popen is not None
        pid = self._popen.pid
        info = procs.process_info(pid)
        ident: dict[str, Any] = {"pid": pid, "pgid": pid, "tag": self._tag, "argv": self._argv}
        if info is not None:
            ident["create_time"] = info.create_time
        return ident

    def exit_code(self) -> tuple[bool, int | None]:
        if self._popen is None:
            return False, None
        code = self._popen.poll()
        return code is not None, code

    def instance_pids(self) -> set[int] | None:
        if self._popen is None:
            return set()
        found = procs.find_instance(tag=self._tag, pgids=(self._popen.pid,))
        return {p.pid for p in found}

    def launch(self) -> Launch:
        return Launch(main_pid=self._popen.pid if self._popen else None, argv=self._argv)

    def _reap(self) -> None:
        if self._popen is not None:
            self._popen.poll()

    def write_logs(self, attempt_dir: Path) -> Path | None:
        return self._log_path
