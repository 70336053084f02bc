"""The readiness protocol, run by every controller (docs/readiness.md "Services").

`Controller.reconfigure()` is the template: it opens the attempt, runs
`apply()` and turns any failure into an `Outcome`. The base `apply()` is the
restart protocol below; each control supplies its backend steps (render, stop
command, start, liveness, logs), and the hot control overrides `apply()`.
`on_phase(name)` hears each step as it starts, in the order of `PHASES`:

    render      render the configuration (argv, drop-in, hook env)
    snapshot    old identity, listeners on the port, GPU baseline
    stop        the control's explicit stop (systemctl stop, the stop hook)
    quiesce     every process of ours gone or zombie (SIGTERM -> grace -> SIGKILL),
                port free, GPU memory back to the baseline
    start       launch and record the new identity
    poll        alive -> port -> health -> identity/config -> generations => READY

On failure: classify, keep the log tail, and quiesce again so nothing is left.
"""

from __future__ import annotations

import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx

import ddtune.services.procs as procs
import ddtune.services.readiness as readiness
from ddtune.engines import Launch, get_engine
from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.services.gpu import GpuBaseline, GpuProbe, baseline, default_probe, not_released
from ddtune.services.leftovers import WORKDIR_VAR, Owner, PortWatch
from ddtune.services.outcome import Outcome, PhaseFailure, classify_exit, tail_lines
from ddtune.services.session import Baseline, Before, answers, stopped_line
from ddtune.services.spec import ServiceSpec

SNAPSHOT_PROBE_TIMEOUT_S = 2.0
PHASES = ("render", "snapshot", "stop", "quiesce", "start", "poll")
Phase = Literal["render", "snapshot", "stop", "quiesce", "start", "poll"]
PhaseCallback = Callable[[str], None]


@dataclass
class Attempt:
    """One `reconfigure()` call: what to apply, where its files go, who hears the phases."""

    params: DecodeParams
    user_vars: Mapping[str, Any]
    attempt_dir: Path
    out: Outcome
    on_phase: PhaseCallback | None = None
    cleanup: bool = True  # a failure stops what runs (False: a server ddtune did not start)
    verify_config: bool = True  # False: the unit's own configuration, unknown to ddtune

    def announce(self, phase: Phase) -> None:
        if self.on_phase is not None:
            self.on_phase(phase)

    @contextmanager
    def phase(self, phase: Phase, timing: str) -> Iterator[None]:
        """Announce `phase`, then time the block as `timings[timing]`."""
        self.announce(phase)
        with self.out.timed(timing):
            yield


class Controller(ABC):
    """One service under our control; subclasses implement the backend steps.

    `owner` (who starts the instances, `leftovers.Owner`) goes into every
    instance's environment with its tag; `build_controller(owner=...)` sets it.
    `foreign_port_final`: an untagged process on the port cannot be one of our
    own instances (False for hooks, whose servers may run anywhere as anyone).
    """

    foreign_port_final = True

    def __init__(self, spec: ServiceSpec, workdir: Path, gpu_probe: GpuProbe | None = None) -> None:
        self.spec = spec
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.engine = get_engine(spec.engine)
        self.gpu: GpuProbe | None = gpu_probe
        self._gpu_note: str | None = None
        if gpu_probe is None:
            self.gpu, self._gpu_note = default_probe(spec.gpu)
        self._last_identity: dict[str, Any] = {}
        self._quiet_gpu: dict[int, float] = {}
        self._closes = 0  # close() calls; a close during reconfigure cancels the start
        self._attempt_dir: Path | None = None
        self.owner = Owner.current()

    # ---- backend steps --------------------------------------------------------

    @abstractmethod
    def render(self, attempt: Attempt) -> None:
        """Render the configuration; raise PhaseFailure("render_failed", ...) if impossible."""

    @abstractmethod
    def our_processes(self) -> list[procs.ProcInfo]:
        """Every live process of any instance this controller started or manages."""

    def stop_command(self) -> None:
        """Ask the service to stop (systemctl stop, stop hook); processes are killed after."""
        return None  # default: nothing to do

    @abstractmethod
    def start(self, attempt: Attempt) -> dict[str, Any]:
        """Launch the new instance; return its process-level identity."""

    def exit_code(self) -> tuple[bool, int | None]:
        """(dead, exit code) of the new instance's main process; (False, None) if unknown."""
        return False, None

    def instance_pids(self) -> set[int] | None:
        """PIDs of the new instance, or None when the control cannot see them (hooks)."""
        return None

    def launch(self) -> Launch:
        return Launch()

    def instance_env(self, tag: str) -> dict[str, str]:
        """The tag and owner variables every process of a new instance carries."""
        return {procs.TAG_VAR: tag, WORKDIR_VAR: str(self.workdir), **self.owner.env()}

    @abstractmethod
    def write_logs(self, attempt_dir: Path) -> Path | None:
        """Make the instance's log available as a file; return its path."""

    def release(self) -> None:
        """Remove what render installed (drop-ins); called by close()."""
        return None  # default: nothing to do

    def _reap(self) -> None:
        """Collect exit statuses of our own children (subclasses that have them)."""
        return None  # default: nothing to do

    # ---- the template ---------------------------------------------------------

    def reconfigure(
        self,
        params: DecodeParams,
        attempt_dir: Path,
        *,
        user_vars: Mapping[str, Any] | None = None,
        on_phase: PhaseCallback | None = None,
        verify_config: bool = True,
    ) -> Outcome:
        """Bring the service to `params` (+ user variables); never raises for service failures.

        `verify_config=False` skips the comparison of the reported configuration (a
        service restarted with its own configuration, which ddtune does not know)."""
        attempt_dir = Path(attempt_dir)
        attempt_dir.mkdir(parents=True, exist_ok=True)
        self._attempt_dir = attempt_dir
        out = Outcome(ready=False, base_url=self.spec.base_url)
        attempt = Attempt(
            params, dict(user_vars or {}), attempt_dir, out, on_phase, verify_config=verify_config
        )
        t0 = time.monotonic()
        try:
            self.apply(attempt)
            out.ready = True
        except PhaseFailure as exc:
            out.fail(exc.failure, exc.detail, exc.holders)
            self._after_failure(attempt)
        except (httpx.HTTPError, OSError, ValueError, subprocess.SubprocessError) as exc:
            out.fail("error", f"{type(exc).__name__}: {exc}")
            self._after_failure(attempt)
        out.timings["total_s"] = round(time.monotonic() - t0, 3)
        if out.ready:
            _keep_log(out, self.write_logs(attempt_dir))
            self._last_identity = dict(out.identity)
        return out

    def apply(self, attempt: Attempt) -> None:
        """The restart protocol: render, snapshot, stop, quiesce, start, poll."""
        out = attempt.out
        if self._gpu_note:
            out.notes.append(self._gpu_note)
        closes_before = self._closes
        with attempt.phase("render", "render_s"):
            self._render(attempt)
        with attempt.phase("snapshot", "snapshot_s"):
            out.previous_identity = self.snapshot()
            gpu_base = self._gpu_baseline(out)
        with out.timed("stop_to_quiet_s"):
            self.stop_and_quiesce(out, gpu_base, announce=attempt.announce)
        if self._closes != closes_before:
            raise PhaseFailure("cancelled", "close() was called during reconfigure; not starting")
        started = time.monotonic()
        with attempt.phase("start", "start_s"):
            out.identity = self.start(attempt)
        attempt.announce("poll")
        self.wait_ready(attempt)
        out.timings["start_to_ready_s"] = round(time.monotonic() - started, 3)

    def _render(self, attempt: Attempt) -> None:
        try:
            self.render(attempt)
        except UserError as exc:  # e.g. a user variable that shadows a built-in placeholder
            raise PhaseFailure("render_failed", str(exc)) from None

    # ---- snapshot, stop and quiesce -------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Identity of whatever runs now: our processes, port listeners, server identity."""
        old = self.our_processes()
        snap: dict[str, Any] = {
            "pids": [{"pid": p.pid, "create_time": p.create_time} for p in old],
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
                    ident, _ = self.engine.read_identity(client, self.spec.base_url, Launch())
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
        self,
        out: Outcome,
        gpu_base: GpuBaseline | None,
        *,
        check_port: bool = True,
        announce: Callable[[Phase], None] | None = None,
    ) -> None:
        """Stop explicitly, kill what is left, wait for a free port and released GPU memory."""
        t = self.spec.timeouts
        if announce is not None:
            announce("stop")
        with out.timed("stop_s"):
            self.stop_command()
        if announce is not None:
            announce("quiesce")
        with out.timed("quiesce_s"):
            left = procs.terminate(self.our_processes, grace=t.stop, kill_wait=t.quiesce)
            self._reap()
            if left:
                out.leftover_pids = [p.pid for p in left]
                raise PhaseFailure("timeout:quiesce", f"could not kill {procs.describe(left)}")
            if check_port:
                self._wait_port_free(out)
        if gpu_base is not None:
            with out.timed("gpu_release_s"):
                self._wait_gpu(gpu_base)

    def port_watch(self, reclaim: bool) -> PortWatch:
        """Who else holds the port (leftovers.py); `reclaim` lets it stop leftovers."""
        t = self.spec.timeouts
        return PortWatch(
            self.spec.port,
            lambda: {p.pid for p in self.our_processes()},
            reclaim=reclaim,
            foreign_final=self.foreign_port_final,
            grace=t.stop,
            kill_wait=t.quiesce,
        )

    def _wait_port_free(self, out: Outcome) -> None:
        """No listener left; leftovers reclaimed if allowed; fail fast on ones we never stop."""
        watch = self.port_watch(reclaim=self.spec.reclaim_leftovers)

        def step() -> str | None:
            holders = watch.check()
            if not holders:
                return None
            named = "; ".join(h.describe() for h in holders)
            return f"port {self.spec.port} still has listener(s): {named}"

        try:
            readiness.poll(
                "quiesce", self.spec.timeouts.quiesce, step, lambda: None, lambda _: "port_in_use"
            )
        finally:
            out.reclaimed.extend(watch.reclaimed)
            out.notes.extend(watch.notes)

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

    # ---- poll -----------------------------------------------------------------

    def wait_ready(self, attempt: Attempt) -> None:
        """Port, health, identity, generations, then the identity once more."""
        out, params = attempt.out, attempt.params
        with out.timed("port_s"):  # right after start: start_s + port_s span spawn to bind
            readiness.wait_port(self)
        with httpx.Client(timeout=self.spec.timeouts.request, trust_env=False) as client:
            with out.timed("health_s"):
                readiness.wait_health(self, client)
            with out.timed("identity_s"):
                found = readiness.wait_identity(
                    self, client, params if attempt.verify_config else None, out.previous_identity
                )
                out.identity.update(found)
            with out.timed("generate_s"):
                readiness.wait_generations(self, client)
            self.check_alive()
            again, _ = self.engine.read_identity(client, self.spec.base_url, self.launch())
            if again.get("instance_id") != out.identity.get("instance_id"):
                raise PhaseFailure(
                    "stale_instance", f"identity changed during the readiness checks: {again}"
                )

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

    # ---- failure and close ----------------------------------------------------

    def _after_failure(self, attempt: Attempt) -> None:
        """Keep the logs, then (unless told not to) quiesce again so nothing is left."""
        out, log = attempt.out, None
        try:
            log = self.write_logs(attempt.attempt_dir)
        except Exception as exc:  # logs must not hide the failure
            out.notes.append(f"could not collect logs: {exc}")
        if attempt.cleanup:
            self._clean_up(out)
        _keep_log(out, self.write_logs(attempt.attempt_dir) or log)

    def _clean_up(self, out: Outcome) -> None:
        """Quiesce (escalating to SIGKILL) and report whatever survived."""
        try:
            self.stop_and_quiesce(Outcome(ready=False), None, check_port=False)
        except PhaseFailure as exc:
            out.notes.append(f"cleanup after failure incomplete: {exc.failure}: {exc.detail}")
        left = self.our_processes()
        out.leftover_pids = sorted({*out.leftover_pids, *(p.pid for p in left)})
        if left:
            out.notes.append(f"could not stop: {procs.describe(left)}")

    # ---- before and after a sweep (`session.py`) ---------------------------------

    def seen_before(self) -> Before:
        """What serves now, looked at before anything is stopped (read only)."""
        return Before(answers(self.spec.base_url))

    def restore(self, before: Before, baseline: Baseline | None) -> str:
        """Put the service back as `before` found it; the line to print (never raises for a
        service failure). Here: ddtune started every instance itself, so none served
        before the sweep: stopped, as before (`sweep apply` prints the command that serves
        a config)."""
        return stopped_line(self.close())

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


def _keep_log(out: Outcome, log: Path | None) -> None:
    """Point the outcome at the instance's log and keep its tail."""
    out.log_path = None if log is None else str(log)
    out.log_tail = tail_lines(log)
