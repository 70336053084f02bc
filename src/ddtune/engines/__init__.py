"""Engines: what ddtune knows about each server engine, looked up by name.

    from ddtune.engines import ENGINES, get_engine
    engine = get_engine("sglang")        # a ServerEngine; unknown names are a UserError
    engine.health_url(base_url); engine.read_identity(client, base_url, launch)
    engine.config_mismatches(params, info, launch); engine.generate_request(...)

Adding an engine is one module with a `ServerEngine` subclass plus one line in
`_ENGINES`. See `base.py` for the interface and docs/readiness.md "Engines".
`launch.py` reads service commands (the `ddtune.launchers` front or the engine
itself); `parser_probe.py` runs the engine's own argument parser in its Python
(the programs in `probes/`), for the engine check.
"""

from __future__ import annotations

from ddtune.engines.base import Launch, RoundTrace, ServerEngine, StreamChunk
from ddtune.engines.ddtune import DdtuneEngine
from ddtune.engines.openai import OpenAIEngine
from ddtune.engines.sglang import SglangEngine
from ddtune.engines.vllm import VllmEngine
from ddtune.errors import UserError

_ENGINES: dict[str, type[ServerEngine]] = {
    DdtuneEngine.name: DdtuneEngine,
    SglangEngine.name: SglangEngine,
    VllmEngine.name: VllmEngine,
    OpenAIEngine.name: OpenAIEngine,
}
ENGINES: tuple[str, ...] = tuple(_ENGINES)


def get_engine(name: str) -> ServerEngine:
    """The engine called `name`; a UserError naming the known engines otherwise."""
    try:
        return _ENGINES[name]()
    except (KeyError, TypeError):
        raise UserError(f"unknown engine {name!r}; expected one of {', '.join(ENGINES)}") from None


__all__ = ["ENGINES", "Launch", "RoundTrace", "ServerEngine", "StreamChunk", "get_engine"]
