"""`control = "hot"`: reconfigure a running `ddtune serve` through `POST /v1/ddtree/config`.

No restart: READY means the *same* instance (instance_id unchanged) now
reports a *new* config_generation whose config equals the request, answers
health, and generates. When no server answers on the port, the controller
starts one with `command` (rendered with the first trial's parameters) through
the full process protocol. A server that was already running is used but never
stopped by close(); one this controller started is. Another sweep's server
(ddtune-tagged: live, left over or of an unknown owner; see leftovers.py) is
never used: `port_in_use` naming it, or, for a leftover with
`reclaim_leftovers`, it is stopped and ours started. In place, `on_phase` hears
snapshot, start (the POST) and poll. See docs/readiness.md "Services".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

import ddtune.services.leftovers as leftovers
import ddtune.services.readiness as readiness
from ddtune.params import PARAM_KEYS, DecodeParams
from ddtune.services.controllers.process import ProcessController
from ddtune.services.outcome import PhaseFailure
from ddtune.services.protocol import Attempt
from ddtune.services.session import Baseline, Before, restored_line

IDENTITY_KEYS = ("instance_id", "pid", "started_at", "config", "config_hash", "config_generation")


@dataclass(frozen=True)
class Switched:
    """Where a config switch left the server: the responses that follow must carry `fingerprint`."""

    instance_id: str
    generation: int
    fingerprint: str = ""

    @classmethod
    def from_identity(cls, identity: dict[str, Any]) -> Switched:
        """The state a READY outcome's identity shows (before any light switch)."""
        return cls(str(identity.get("instance_id")), int(identity.get("config_generation") or 0))


class HotController(ProcessController):
    """Hot reconfiguration of ddtune serve; see the module docstring."""

    def apply(self, attempt: Attempt) -> None:
        """POST the config to the running server; without one, the restart protocol starts it."""
        if self._popen is None:
            self._refuse_other_sweeps(attempt)
        if not self._server_answers():
            attempt.out.notes.append("hot: no server was running; started one with service.command")
            super().apply(attempt)
            return
        attempt.cleanup = self._popen is not None  # a failure stops only a server we started
        attempt.out.timings["stop_to_quiet_s"] = 0.0
        with attempt.out.timed("start_to_ready_s"):
            self._apply_in_place(attempt)

    def _refuse_other_sweeps(self, attempt: Attempt) -> None:
        """A ddtune-tagged server that is not ours is another sweep's: reclaim or refuse it."""
        watch = self.port_watch(reclaim=self.spec.reclaim_leftovers)
        ours = {p.pid for p in self.our_processes()}  # this workdir's: used as before
        holders = [h for h in leftovers.port_holders(self.spec.port, ours) if h.kind != "ours"]
        holders = [h for h in holders if h.tag is not None]  # untagged: a server by hand, used
        for h in holders:
            if h.kind == "leftover" and watch.reclaim:
                watch.reclaim_one(h)
        attempt.out.reclaimed.extend(watch.reclaimed)
        attempt.out.notes.extend(watch.notes)
        refused = [h for h in holders if not (h.kind == "leftover" and watch.reclaim)]
        if refused:
            raise watch.failure(refused)

    def seen_before(self) -> Before:
        """Whether a server answers, and its config (what the restore POSTs back)."""
        info = self.serving()
        config = info.get("config") if isinstance(info.get("config"), dict) else None
        return Before(bool(info), config)

    def restore(self, before: Before, baseline: Baseline | None) -> str:
        """A server that answered before the sweep: its config POSTed back in place and
        checked READY (it keeps running, as before); one ddtune started: stopped."""
        if before.hot_config is None:
            return super().restore(before, baseline)
        params = DecodeParams.from_wire(
            {k: v for k, v in before.hot_config.items() if k in PARAM_KEYS}
        )
        outcome = self.reconfigure(params, self.workdir / "restore")
        self.close()  # a server that ran before the sweep is left running
        return restored_line(outcome, f"the running server is back on {params.label()} in place")

    def _server_answers(self) -> bool:
        return bool(self.serving())

    def serving(self) -> dict[str, Any]:
        """The `/server_info` of the server answering on the port now; {} when none does."""
        try:
            with httpx.Client(timeout=self.spec.timeouts.request, trust_env=False) as client:
                reply = client.get(self.spec.base_url + "/server_info")
                info = reply.json() if reply.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}

    def _apply_in_place(self, attempt: Attempt) -> None:
        """Phases snapshot, start (the POST) and poll: identity, health, generations."""
        out, params = attempt.out, attempt.params
        with httpx.Client(timeout=self.spec.timeouts.request, trust_env=False) as client:
            with attempt.phase("snapshot", "snapshot_s"):
                old = client.get(self.spec.base_url + "/server_info").raise_for_status().json()
                out.previous_identity = {
                    k: old.get(k) for k in ("instance_id", "pid", "config", "config_generation")
                }
            with attempt.phase("start", "apply_s"):
                applied = self._post_config(client, params, old)
            attempt.announce("poll")
            with out.timed("identity_s"):
                out.identity = self._wait_applied(client, params, old, applied)
            with out.timed("health_s"):
                readiness.wait_health(self, client)
            with out.timed("generate_s"):
                readiness.wait_generations(self, client)

    def switch(self, client: httpx.Client, params: DecodeParams, last: Switched) -> Switched:
        """Between two requests of a request-interleaved pass: POST the config, no poll.

        The reply must come from `last`'s instance with a newer generation and the
        config asked for (`PhaseFailure` otherwise); the caller checks that the next
        response carries the returned fingerprint, so no request is timed under
        another config. The full protocol (`reconfigure`) made each config READY first.
        """
        applied = self._post_config(client, params, {"config_generation": last.generation})
        if applied.get("instance_id") != last.instance_id:
            raise PhaseFailure(
                "instance_changed",
                f"instance {last.instance_id} was replaced by {applied.get('instance_id')}",
            )
        return Switched(
            last.instance_id, applied["config_generation"], applied.get("system_fingerprint", "")
        )

    def _post_config(
        self, client: httpx.Client, params: DecodeParams, old: dict[str, Any]
    ) -> dict[str, Any]:
        reply = client.post(self.spec.base_url + "/v1/ddtree/config", json=params.to_wire())
        if reply.status_code != 200:
            raise PhaseFailure(
                "config_mismatch",
                f"POST /v1/ddtree/config -> {reply.status_code}: {reply.text[:300]}",
            )
        applied: dict[str, Any] = reply.json()
        if not _newer(applied.get("config_generation"), old.get("config_generation")):
            raise PhaseFailure(
                "stale_instance",
                "config_generation did not advance "
                f"({old.get('config_generation')} -> {applied.get('config_generation')})",
            )
        mismatches = self.engine.config_mismatches(params, applied)
        if mismatches:
            raise PhaseFailure(
                "config_mismatch", "the server applied another config: " + "; ".join(mismatches)
            )
        return applied

    def _wait_applied(
        self,
        client: httpx.Client,
        params: DecodeParams,
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
                return (
                    f"server_info reports config_generation {info.get('config_generation')}, "
                    f"expected {applied.get('config_generation')}"
                )
            mismatches = self.engine.config_mismatches(params, info)
            if mismatches:
                raise PhaseFailure("config_mismatch", "; ".join(mismatches))
            found.update({k: info.get(k) for k in IDENTITY_KEYS})
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
