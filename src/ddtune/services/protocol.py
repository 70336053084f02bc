"""The readiness protocol (DESIGN.md), run by every controller kind.

`Controller.reconfigure()` is the template; each kind supplies the backend
steps (render/preflight, stop command, start, liveness, logs):

    1. preflight   render the configuration (argv, drop-in, hook env)
    2. snapshot    old identity, listeners on the port, GPU baseline
    3. stop        explicit stop, then quiesce: every process of ours gone or
                   zombie (SIGTERM -> grace -> SIGKILL), port free, GPU back to baseline
    4. start       launch and record the new identity
    5. poll        alive -> port -> health -> identity/config -> generations => READY
    6. on failure  classify, keep the log tail, and quiesce again so nothing is left
"""

from __future__ import annotations

import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx

from ddtune.params import DecodeParams
from ddtune.services import procs, readiness
from ddtune.services.gpu import GpuBaseline, GpuProbe, baseline, default_probe, not_released
from ddtune.services.outcome import Outcome, PhaseFailure, classify_exit, tail_lines
from ddtune.services.profiles import Launch, make_profile
from ddtune.services.spec import ServiceSpec

SNAPSHOT_PROBE_TIMEOUT_S = 2.0
PHASES = ("preflight", "snapshot", "stop", "quiesce", "start", "poll")
PhaseCallback = Callable[[str], None]


class Controller(ABC):
    """One service under our control; subclasses implement the backend steps."""

    def __init__(self, spec: ServiceSpec, workdir: Path, gpu_probe: GpuProbe | None = None) -> None:
        self.spec = spec
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.profile = make_profile(spec)
        if gpu_probe is not None:
            self.gpu, self._gpu_note = gpu_probe, None
        else:
            self.gpu, self._gpu_note = default_probe(spec.gpu)
        self._last_identity: dict[str, Any] = {}
        self._quiet_gpu: dict[int, float] = {}
        self._closes = 0  # close() calls; a close during reconfigure cancels the start
        self._attempt_dir: Path | None = None
        self._on_phase: PhaseCallback | None = None

    # ---- backend steps --------------------------------------------------------

    @abstractmethod
    def preflight(self, params: dict[str, Any], attempt_dir: Path) -> None:
        """Render the configuration; raise PhaseFailure("preflight_failed", ...) if impossible."""

    @abstractmethod
    def our_processes(self) -> list[procs.ProcInfo]:
        """Every live process of any instance this controller started or manages."""

    def stop_command(self) -> None:
        """Ask the service to stop (systemctl stop, stop hook); processes are killed after."""
        return None  # default: nothing to do

    @abstractmethod
    def start(self, params: dict[str, Any], attempt_dir: Path) -> dict[str, Any]:
        """Launch the new instance; return its process-level identity."""

    def exit_code(self) -> tuple[bool, int | None]:
        """(dead, exit code) of the new instance's main process; (False, None) if unknown."""
        return False, None

    def instance_pids(self) -> set[int] | None:
        """PIDs of the new instance, or None when the kind cannot see them (hooks)."""
        return None

    def launch(self) -> Launch:
        return Launch()

    @abstractmethod
    def write_logs(self, attempt_dir: Path) -> Path | None:
        """Make the instance's log available as a file; return its path."""

    def release(self) -> None:
        """Remove what preflight installed (drop-ins); called by close()."""
        return None  # default: nothing to do

    # ---- the protocol ---------------------------------------------------------

    def reconfigure(
        self,
        params: DecodeParams | dict[str, Any],
        attempt_dir: Path,
        *,
        user_vars: Mapping[str, Any] | None = None,
        on_phase: PhaseCallback | None = None,
    ) -> Outcome:
        """Run the whole protocol for `params` (+ user variables); never raises for service failures.

        `on_phase(name)` hears each name of `PHASES` as that step starts.
        """
        self._on_phase = on_phase  # sweep-branch shim until the services rewrite lands
        try:
            return self._reconfigure(_as_dict(params, user_vars), Path(attempt_dir))
        finally:
            self._on_phase = None

    def _reconfigure(self, params: dict[str, Any], attempt_dir: Path) -> Outcome:
        attempt_dir = Path(attempt_dir)
        attempt_dir.mkdir(parents=True, exist_ok=True)
        self._attempt_dir = attempt_dir
        out = Outcome(ready=False, base_url=self.spec.base_url)
        if self._gpu_note:
            out.notes.append(self._gpu_note)
        t0 = time.monotonic()
        try:
            self._run(params, attempt_dir, out)
            out.ready = True
        except PhaseFailure as exc:
            out.failure, out.detail = exc.failure, exc.detail
            self._after_failure(attempt_dir, out)
        except (httpx.HTTPError, OSError, ValueError, subprocess.SubprocessError) as exc:
            out.failure, out.detail = "error", f"{type(exc).__name__}: {exc}"
            self._after_failure(attempt_dir, out)
        out.timings["total_s"] = round(time.monotonic() - t0, 3)
        if out.ready:
            out.log_path = _str(self.write_logs(attempt_dir))
            out.log_tail = tail_lines(Path(out.log_path) if out.log_path else None)
            self._last_identity = dict(out.identity)
        return out

    def _run(self, params: dict[str, Any], attempt_dir: Path, out: Outcome) -> None:
        closes_before = self._closes
        self._announce("preflight")
        with _Timer(out, "preflight_s"):
            self.preflight(params, attempt_dir)
        self._announce("snapshot")
        with _Timer(out, "snapshot_s"):
            out.previous_identity = self.snapshot()
            gpu_base = self._gpu_baseline(out)
        with _Timer(out, "stop_to_quiet_s"):
            self.stop_and_quiesce(out, gpu_base)
        if self._closes != closes_before:
            raise PhaseFailure("cancelled", "close() was called during reconfigure; not starting")
        started = time.monotonic()
        self._announce("start")
        with _Timer(out, "start_s"):
            out.identity = self.start(params, attempt_dir)
        self.wait_ready(params, out)
        out.timings["start_to_ready_s"] = round(time.monotonic() - started, 3)

    def snapshot(self) -> dict[str, Any]:
        """Identity of whatever runs now: our processes, port listeners, server identity."""
        old = self.our_processes()
        snap: dict[str, Any] = {
            "pids": [{"pid": p.pid, "start_ticks": p.start_ticks} for p in old],
            "listeners": sorted(
                pid for pid in procs.port_listeners(self.spec.port).values() if pid
            ),
        }
        snap.update(
            {
                k: v
                for k, v in self._last_identity.items()
                if k in ("instance_id", "pid", "invocation_id")
            }
        )
        if snap["listeners"]:
            try:
                with httpx.Client(timeout=SNAPSHOT_PROBE_TIMEOUT_S, trust_env=False) as client:
                    ident, _ = self.profile.identity(client, {}, Launch())
                snap.update({k: v for k, v in ident.items() if v is not None})
            except Exception:  # the old server may be sick; the snapshot is best effort
                pass
        return snap

    def _gpu_baseline(self, out: Outcome) -> GpuBaseline | None:
        if self.gpu is None:
            return None
        devices = self.gpu.read()
        if not devices:
            out.notes.append("GPU check skipped: no NVIDIA GPU")
            return None
        old = {p.pid for p in self.our_processes()}
        base = baseline(devices, old)
        attributed = any(pid in d.processes for d in devices for pid in old)
        if not old:
            self._quiet_gpu = dict(base.used_mib)  # nothing of ours runs: this is the floor
        elif not attributed and self._quiet_gpu:
            base = GpuBaseline(
                {i: min(v, self._quiet_gpu.get(i, v)) for i, v in base.used_mib.items()},
                base.old_pids,
            )
        elif not attributed:
            out.notes.append(
                "GPU baseline unknown: the old instance's memory is not attributed to its pids"
            )
        return base

    def stop_and_quiesce(
        self, out: Outcome, gpu_base: GpuBaseline | None, check_port: bool = True
    ) -> None:
        """Stop explicitly, kill what is left, wait for a free port and released GPU memory."""
        t = self.spec.timeouts
        self._announce("stop")
        with _Timer(out, "stop_s"):
            self.stop_command()
        self._announce("quiesce")
        with _Timer(out, "quiesce_s"):
            left = procs.terminate(self.our_processes, grace=t.stop, kill_wait=t.quiesce)
            self._reap()
            if left:
                out.leftover_pids = [p.pid for p in left]
                raise PhaseFailure("timeout:quiesce", f"could not kill {procs.describe(left)}")
            if check_port:
                self._wait_port_free()
        if gpu_base is not None:
            with _Timer(out, "gpu_release_s"):
                self._wait_gpu(gpu_base)

    def _reap(self) -> None:
        """Collect exit statuses of our own children (subclasses that have them)."""
        return None  # default: nothing to do

    def _wait_port_free(self) -> None:
        def step() -> str | None:
            owners = procs.port_listeners(self.spec.port)
            if not owners:
                return None
            return f"port {self.spec.port} still has listener(s) owned by " + ", ".join(
                f"pid {pid} ({' '.join(procs.read_cmdline(pid))[:80]})"
                if pid
                else "an unreadable process"
                for pid in owners.values()
            )

        readiness.poll(
            "quiesce", self.spec.timeouts.quiesce, step, lambda: None, lambda reason: "port_in_use"
        )

    def _wait_gpu(self, base: GpuBaseline) -> None:
        def step() -> str | None:
            devices = self.gpu.read() if self.gpu else None
            return not_released(devices, base, self.spec.gpu_tolerance_mib) if devices else None

        readiness.poll(
            "gpu",
            self.spec.timeouts.gpu,
            step,
            lambda: None,
            lambda reason: "gpu_memory_not_released",
        )

    def wait_ready(self, params: dict[str, Any], out: Outcome) -> None:
        """Step 5: port, health, identity, generations, then the identity once more."""
        previous = out.previous_identity
        self._announce("poll")
        with httpx.Client(timeout=self.spec.timeouts.request, trust_env=False) as client:
            with _Timer(out, "port_s"):
                readiness.wait_port(self)
            with _Timer(out, "health_s"):
                readiness.wait_health(self, client)
            with _Timer(out, "identity_s"):
                out.identity.update(readiness.wait_identity(self, client, params, previous))
            with _Timer(out, "generate_s"):
                readiness.wait_generations(self, client)
            self.check_alive()
            again, _ = self.profile.identity(client, params, self.launch())
            if again.get("instance_id") != out.identity.get("instance_id"):
                raise PhaseFailure(
                    "stale_instance", f"identity changed during the readiness checks: {again}"
                )

    def _announce(self, phase: str) -> None:
        if self._on_phase is not None:
            self._on_phase(phase)

    def check_alive(self) -> None:
        """Fail fast with the exit code and log tail when the new main process died."""
        dead, code = self.exit_code()
        if not dead:
            return
        log = self.write_logs(self._attempt_dir) if self._attempt_dir else None
        tail = tail_lines(log, 40)
        last = tail.strip().splitlines()[-1:] or ["(empty log)"]
        raise PhaseFailure(
            classify_exit(code, tail),
            f"the new process exited with code {code}; last log line: {last[0]}",
        )

    def _after_failure(self, attempt_dir: Path, out: Outcome) -> None:
        """Keep the logs, then quiesce again (escalating to SIGKILL) so nothing is left."""
        log = None
        try:
            log = self.write_logs(attempt_dir)
        except Exception as exc:  # logs must not hide the failure
            out.notes.append(f"could not collect logs: {exc}")
        try:
            self.stop_and_quiesce(Outcome(ready=False), None, check_port=False)
        except PhaseFailure as exc:
            out.notes.append(f"cleanup after failure incomplete: {exc.failure}: {exc.detail}")
        left = self.our_processes()
        out.leftover_pids = sorted({*out.leftover_pids, *(p.pid for p in left)})
        if left:
            out.notes.append(f"could not stop: {procs.describe(left)}")
        log = self.write_logs(attempt_dir) or log
        out.log_path = _str(log)
        out.log_tail = tail_lines(log)

    def close(self) -> list[str]:
        """Stop the service, remove drop-ins, quiesce; idempotent. Returns notes on leftovers."""
        self._closes += 1
        notes = []
        try:
            self.stop_and_quiesce(Outcome(ready=False), None)
        except PhaseFailure as exc:
            notes.append(f"{exc.failure}: {exc.detail}")
        finally:
            self.release()
        self._last_identity = {}
        return notes


class _Timer:
    """`with _Timer(out, "x_s"):` records the block's duration in out.timings."""

    def __init__(self, out: Outcome, key: str) -> None:
        self.out, self.key = out, key

    def __enter__(self) -> None:
        self.t0 = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        self.out.timings[self.key] = round(time.monotonic() - self.t0, 3)


def _as_dict(params: DecodeParams | dict[str, Any], user_vars: Mapping[str, Any] | None) -> dict:
    """The params dict the controllers render (window None); DecodeParams + vars accepted."""
    if isinstance(params, DecodeParams):
        return {**asdict(params), **dict(user_vars or {})}
    return dict(params)


def _str(path: Path | None) -> str | None:
    return None if path is None else str(path)
