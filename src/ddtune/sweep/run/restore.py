"""Put the service back as it was before the sweep, and prove it READY.

    before = seen_before(controller)                # before the first stop
    ...the sweep...
    line = restore(controller, before, baseline)    # at the end, on Ctrl-C/SIGTERM, at the breaker

What "as it was" means depends on who runs the service:

    systemd  the unit was active: the trial drop-in is removed and the unit started
             with its own configuration (its unit file and persistent drop-ins, a
             `sweep apply` included), through the full readiness protocol (a new
             InvocationID, health, generations); it was inactive: left stopped
    hot      a server answered before the sweep: its config is POSTed back in place
             and checked READY (the server keeps running, as before); ddtune started
             it: stopped, as before the sweep
    process  ddtune starts every instance itself, so before the sweep none ran:
             stopped, as before (`sweep apply` prints the command that serves a config)
    hooks    ddtune cannot read the configuration a hooks service had; one answered
             before the sweep: the start hook serves `[sweep] baseline`, checked
             READY; without a baseline it is left stopped and the line says so

`restore` never raises for a service failure: it returns the line the summary
prints, which says READY or exactly what is wrong. See docs/engines.md "Safe on a production service".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from ddtune.params import DecodeParams
from ddtune.services.controllers.systemd import SystemdController
from ddtune.services.outcome import PhaseFailure

if TYPE_CHECKING:
    from ddtune.services import Controller, Outcome
    from ddtune.services.protocol import Attempt
    from ddtune.sweep.spec.parse import Config

PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Before:
    """What served before the sweep."""

    serving: bool  # the unit was active / a server answered on the port
    hot_config: dict[str, Any] | None = None  # hot: the running server's config


def seen_before(controller: Controller) -> Before:
    """Look at the service before anything is stopped (read only)."""
    spec = controller.spec
    if spec.control == "systemd" and isinstance(controller, SystemdController):
        try:
            return Before(controller.show().get("ActiveState") in ("active", "activating"))
        except PhaseFailure:  # no systemctl here: the first trial's render step says so
            return Before(False)
    if spec.control == "hot":
        from ddtune.services.controllers.hot import HotController

        info = controller.serving() if isinstance(controller, HotController) else {}
        config = info.get("config") if isinstance(info.get("config"), dict) else None
        return Before(bool(info), config)
    return Before(_answers(spec.base_url))


def restore(controller: Controller, before: Before, baseline: Config | None) -> str:
    """Bring the service back to `before` (module docstring); the line to print."""
    control = controller.spec.control
    if control == "hot" and before.hot_config is not None:
        return _hot(controller, before.hot_config)
    notes = controller.close()
    if control == "systemd" and before.serving:
        return _unit_as_it_was(controller)
    if control == "hooks" and before.serving:
        return _hooks_baseline(controller, baseline)
    left = f" ({'; '.join(notes)})" if notes else ""
    return f"the service is stopped, as it was before the sweep{left}"


def _hot(controller: Controller, config: dict[str, Any]) -> str:
    params = DecodeParams.from_wire(
        {k: v for k, v in config.items() if k in ("mode", "budget", "topk", "window")}
    )
    outcome = controller.reconfigure(params, _folder(controller, "restore"))
    controller.close()  # a server that ran before the sweep is left running
    return _said(outcome, f"the running server is back on {params.label()} in place")


def _unit_as_it_was(controller: Controller) -> str:
    unit = UnitAsItWas(controller.spec, controller.workdir)
    outcome = unit.reconfigure(
        DecodeParams("ar"), _folder(controller, "restore"), verify_config=False
    )
    return _said(
        outcome, f"{unit.unit} is back on its own configuration (the sweep's drop-in removed)"
    )


def _hooks_baseline(controller: Controller, baseline: Config | None) -> str:
    if baseline is None:
        return (
            "the service is stopped: it served before the sweep, but a hooks service's own "
            "configuration is unknown to ddtune and the spec has no [sweep] baseline; start "
            "it as you normally do"
        )
    outcome = controller.reconfigure(
        baseline.params, _folder(controller, "restore"), user_vars=baseline.user_vars()
    )
    return _said(outcome, f"the start hook serves the baseline {baseline.label()}")


def _said(outcome: Outcome, done: str) -> str:
    if outcome.ready:
        return f"restored: {done}: READY in {outcome.timings.get('start_to_ready_s', 0):.1f} s"
    log = f"; log {outcome.log_path}" if outcome.log_path else ""
    return (
        f"NOT restored: {done} was tried and is not READY: {outcome.failure} — "
        f"{outcome.detail}{log}; the service needs a hand now"
    )


def _folder(controller: Controller, name: str) -> Path:
    return controller.workdir / name


def _answers(base_url: str) -> bool:
    try:
        with httpx.Client(timeout=PROBE_TIMEOUT_S, trust_env=False) as client:
            return client.get(base_url + "/v1/models").status_code < 500
    except httpx.HTTPError:
        return False


class UnitAsItWas(SystemdController):
    """The unit with no trial drop-in: its own configuration, whatever that is."""

    def dropin_for(self, attempt: Attempt) -> str | None:
        self._argv = None
        return None


__all__ = ["Before", "UnitAsItWas", "restore", "seen_before"]
