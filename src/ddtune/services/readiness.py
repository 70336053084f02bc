"""Step 5 of the readiness protocol: poll the new instance until it is READY.

    start     the new instance (not someone else) listens on the port
    health    the engine's health endpoint answers 200
    identity  the instance is new and reports the requested configuration
    generate  `spec.generations` consecutive 1-token completions succeed

Each phase has its own deadline (`spec.timeouts`) and polls with backoff.
Before every poll the controller checks that the new process is alive and
fails fast (crashed/oom/port_in_use, with the log tail) when it is not.
See docs/readiness.md "Services".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import httpx

import ddtune.services.procs as procs
from ddtune.services.outcome import PhaseFailure

if TYPE_CHECKING:
    from ddtune.engines import Launch
    from ddtune.engines.base import ServerEngine
    from ddtune.params import DecodeParams
    from ddtune.services.leftovers import PortWatch
    from ddtune.services.spec import ServiceSpec

MAX_BACKOFF_S = 1.0


class Controller(Protocol):
    """What the waits read of a controller (`protocol.Controller` is one; naming only this
    keeps readiness below the protocol that runs it)."""

    spec: ServiceSpec
    engine: ServerEngine

    def launch(self) -> Launch: ...

    def port_watch(self, reclaim: bool) -> PortWatch: ...

    def instance_pids(self) -> set[int] | None: ...

    def check_alive(self) -> None: ...


def poll(
    phase: str,
    timeout: float,
    step: Callable[[], str | None],
    alive: Callable[[], None],
    failure: Callable[[str], str] | None = None,
) -> None:
    """Call `step` until it returns None (done); it returns a reason while not done.

    `alive()` raises PhaseFailure when the process died. At the deadline the
    failure is `failure(last_reason)` if given, else `timeout:<phase>`.
    """
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        alive()
        try:
            why = step()
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            why = f"{type(exc).__name__}: {exc}"  # e.g. refused, or not JSON while loading
        if why is None:
            return
        if time.monotonic() >= deadline:
            cls = failure(why) if failure else f"timeout:{phase}"
            raise PhaseFailure(cls, f"{phase} not reached after {timeout:.0f}s: {why}")
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 1.5, MAX_BACKOFF_S)


def wait_port(ctl: Controller) -> None:
    """The port is listened on by a process of the new instance.

    A holder that will never go away (leftovers.py: not ddtune's, another live
    sweep's, an unreclaimed leftover) ends the wait early with `port_in_use`.
    """
    seen_foreign: list[str] = []
    watch = ctl.port_watch(reclaim=False)

    def step() -> str | None:
        listeners = procs.port_listeners(ctl.spec.port)
        if not listeners:
            return f"nothing listens on port {ctl.spec.port} yet"
        ours = ctl.instance_pids()
        if ours is None or any(pid in ours for pid in listeners.values()):
            return None
        named = "; ".join(h.describe() for h in watch.check())
        seen_foreign.append(named)
        return f"port {ctl.spec.port} is held by {named}, not by the new instance"

    def failure(reason: str) -> str:
        return "port_in_use" if seen_foreign else "timeout:start"

    poll("start", ctl.spec.timeouts.start, step, ctl.check_alive, failure)


def wait_health(ctl: Controller, client: httpx.Client) -> None:
    url = ctl.spec.health_url or ctl.engine.health_url(ctl.spec.base_url)

    def step() -> str | None:
        reply = client.get(url)
        return None if reply.status_code == 200 else f"GET {url} -> {reply.status_code}"

    poll("health", ctl.spec.timeouts.health, step, ctl.check_alive)


def wait_identity(
    ctl: Controller, client: httpx.Client, params: DecodeParams | None, previous: dict[str, Any]
) -> dict[str, Any]:
    """Poll the identity probe; stale answers keep polling, a config mismatch fails at once
    (`params` None: a configuration ddtune does not know, not compared)."""
    found: dict[str, Any] = {}
    stale: list[str] = []

    def step() -> str | None:
        launch = ctl.launch()
        ident, info = ctl.engine.read_identity(client, ctl.spec.base_url, launch)
        why_stale = stale_reason(ident, previous, ctl.instance_pids())
        if why_stale:
            stale.append(why_stale)
            return why_stale
        mismatches = [] if params is None else ctl.engine.config_mismatches(params, info, launch)
        if mismatches:
            raise PhaseFailure("config_mismatch", "; ".join(mismatches))
        found.update(ident)
        return None

    def failure(reason: str) -> str:
        return "stale_instance" if stale and reason == stale[-1] else "timeout:identity"

    poll("identity", ctl.spec.timeouts.identity, step, ctl.check_alive, failure)
    return found


def stale_reason(
    ident: dict[str, Any], previous: dict[str, Any], ours: set[int] | None
) -> str | None:
    """Why the answering server is not the new instance, or None."""
    old_id = previous.get("instance_id")
    if old_id and ident.get("instance_id") == old_id:
        return f"server still reports the old instance_id {old_id}"
    pid = ident.get("pid")
    if ours is not None and isinstance(pid, int) and pid not in ours:
        return (
            f"server reports pid {pid}, which is not a process of the new instance {sorted(ours)}"
        )
    return None


def wait_generations(ctl: Controller, client: httpx.Client) -> None:
    """`spec.generations` 1-token completions in a row; a failure restarts the count."""
    streak = [0]
    model: list[str] = []

    def step() -> str | None:
        if not model:
            model.append(ctl.spec.model or ctl.engine.model_name(client, ctl.spec.base_url))
        why = ctl.engine.generate_one_token(client, ctl.spec.base_url, model[0])
        streak[0] = 0 if why else streak[0] + 1
        if why:
            return why
        return (
            None
            if streak[0] >= ctl.spec.generations
            else f"{streak[0]} of {ctl.spec.generations} generations done"
        )

    poll("generate", ctl.spec.timeouts.generate, step, ctl.check_alive)
