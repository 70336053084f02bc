"""Server kinds: what ddtune knows about each kind of server, looked up by name.

    from ddtune.kinds import SERVER_KINDS, get_kind
    kind = get_kind("sglang")          # a ServerKind; unknown names are a UserError
    kind.health_url(base_url); kind.read_identity(client, base_url, launch)
    kind.config_mismatches(params, info, launch); kind.generate_request(...)

Adding a kind is one module with a `ServerKind` subclass plus one line in
`_KINDS`. See `base.py` for the interface and docs/readiness.md "Kinds".
`launch.py` reads service commands (the `ddtune.launchers` front or the engine
itself); `engine_check.py` runs the engine's own argument parser in its Python
(the programs in `probes/`), for the preflight.
"""

from __future__ import annotations

from ddtune.errors import UserError
from ddtune.kinds.base import Launch, RoundTrace, ServerKind, StreamChunk
from ddtune.kinds.ddtune import DdtuneKind
from ddtune.kinds.openai import OpenAIKind
from ddtune.kinds.sglang import SglangKind
from ddtune.kinds.vllm import VllmKind

_KINDS: dict[str, type[ServerKind]] = {
    DdtuneKind.name: DdtuneKind,
    SglangKind.name: SglangKind,
    VllmKind.name: VllmKind,
    OpenAIKind.name: OpenAIKind,
}
SERVER_KINDS: tuple[str, ...] = tuple(_KINDS)


def get_kind(name: str) -> ServerKind:
    """The kind called `name`; a UserError naming the allowed kinds otherwise."""
    try:
        return _KINDS[name]()
    except (KeyError, TypeError):
        raise UserError(
            f"unknown server kind {name!r}; expected one of {', '.join(SERVER_KINDS)}"
        ) from None


__all__ = ["SERVER_KINDS", "Launch", "RoundTrace", "ServerKind", "StreamChunk", "get_kind"]
