"""`kind = "hot"`: reconfigure a running `ddtune serve` through `POST /v1/ddtree/config`.

No restart: READY means the *same* instance (instance_id unchanged) now
reports a *new* config_generation whose config equals the request, answers
health, and generates. When no server answers on the port, the controller
starts one with `command` (rendered with the first trial's parameters) through
the full process protocol. A server that was already running is used but never
stopped by close(); one this controller started is.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from ddtune.services import readiness
from ddtune.services.outcome import Outcome, PhaseFailure, tail_lines
from ddtune.services.process import ProcessController
from ddtune.services.profiles import compare_ddtune_config
from ddtune.services.protocol import _Timer

HOT_KEYS = ("mode", "budget", "topk", "window")


class HotController(ProcessController):
    """Hot reconfiguration of ddtune serve; see the module docstring."""

    def _reconfigure(self, params: dict[str, Any], attempt_dir: Path) -> Outcome:
        attempt_dir = Path(attempt_dir)
        attempt_dir.mkdir(parents=True, exist_ok=True)
        if not self._server_answers():
            out = super()._reconfigure(params, attempt_dir)
            out.notes.append("hot: no server was running; started one with service.command")
            return out
        self._attempt_dir = attempt_dir
        out = Outcome(ready=False, base_url=self.spec.base_url, timings={"stop_to_quiet_s": 0.0})
        t0 = time.monotonic()
        try:
            self._hot_apply(params, out)
            out.ready = True
        except (PhaseFailure, httpx.HTTPError, ValueError) as exc:
            is_phase = isinstance(exc, PhaseFailure)
            out.failure = exc.failure if is_phase else "error"
            out.detail = exc.detail if is_phase else f"{type(exc).__name__}: {exc}"
            if self._popen is not None:  # a server we started: stop it, the next trial starts fresh
                self._after_failure(attempt_dir, out)
        out.timings["start_to_ready_s"] = out.timings["total_s"] = round(time.monotonic() - t0, 3)
        out.log_path = str(self._log_path) if self._log_path else None
        out.log_tail = tail_lines(self._log_path)
        if out.ready:
            self._last_identity = dict(out.identity)
        return out

    def _server_answers(self) -> bool:
        try:
            with httpx.Client(timeout=self.spec.timeouts.request, trust_env=False) as client:
                return client.get(self.spec.base_url + "/server_info").status_code == 200
        except httpx.HTTPError:
            return False

    def _hot_apply(self, params: dict[str, Any], out: Outcome) -> None:
        """Snapshot, POST the config, then poll identity/health/generations."""
        with httpx.Client(timeout=self.spec.timeouts.request, trust_env=False) as client:
            with _Timer(out, "snapshot_s"):
                old = client.get(self.spec.base_url + "/server_info").raise_for_status().json()
                out.previous_identity = {
                    k: old.get(k) for k in ("instance_id", "pid", "config", "config_generation")
                }
            with _Timer(out, "apply_s"):
                applied = self._post_config(client, params, old)
            with _Timer(out, "identity_s"):
                out.identity = self._wait_applied(client, params, old, applied)
            with _Timer(out, "health_s"):
                readiness.wait_health(self, client)
            with _Timer(out, "generate_s"):
                readiness.wait_generations(self, client)

    def _post_config(
        self, client: httpx.Client, params: dict[str, Any], old: dict[str, Any]
    ) -> dict[str, Any]:
        body = {k: params[k] for k in HOT_KEYS if k in params}
        reply = client.post(self.spec.base_url + "/v1/ddtree/config", json=body)
        if reply.status_code != 200:
            raise PhaseFailure(
                "config_mismatch",
                f"POST /v1/ddtree/config -> {reply.status_code}: {reply.text[:300]}",
            )
        applied = reply.json()
        if not _newer(applied.get("config_generation"), old.get("config_generation")):
            raise PhaseFailure(
                "stale_instance",
                f"config_generation did not advance ({old.get('config_generation')} -> {applied.get('config_generation')})",
            )
        mismatches = compare_ddtune_config(params, applied.get("config") or {})
        if mismatches:
            raise PhaseFailure(
                "config_mismatch", "the server applied another config: " + "; ".join(mismatches)
            )
        return applied

    def _wait_applied(
        self,
        client: httpx.Client,
        params: dict[str, Any],
        old: dict[str, Any],
        applied: dict[str, Any],
    ) -> dict[str, Any]:
        """/server_info shows the same instance with the new generation and config."""
        found: dict[str, Any] = {}

        def step() -> str | None:
            info = client.get(self.spec.base_url + "/server_info").raise_for_status().json()
            if info.get("instance_id") != old.get("instance_id"):
                raise PhaseFailure(
                    "instance_changed",
                    f"instance {old.get('instance_id')} was replaced by {info.get('instance_id')}",
                )
            if info.get("config_generation") != applied.get("config_generation"):
                return f"server_info reports config_generation {info.get('config_generation')}, expected {applied.get('config_generation')}"
            mismatches = compare_ddtune_config(params, info.get("config") or {})
            if mismatches:
                raise PhaseFailure("config_mismatch", "; ".join(mismatches))
            found.update(
                {
                    k: info.get(k)
                    for k in (
                        "instance_id",
                        "pid",
                        "started_at",
                        "config",
                        "config_hash",
                        "config_generation",
                    )
                }
            )
            return None

        readiness.poll(
            "identity",
            self.spec.timeouts.identity,
            step,
            self.check_alive,
            lambda reason: "stale_instance",
        )
        return found

    def close(self) -> list[str]:
        if self._popen is None:
            return ["hot: the server was already running before ddtune; left running"]
        return super().close()


def _newer(new: Any, old: Any) -> bool:
    return isinstance(new, int) and (not isinstance(old, int) or new > old)
