"""`ddtune serve`: an OpenAI-compatible HTTP server around one DDTree `Engine`.

    from ddtune.server import ServeConfig, serve
    serve(ServeConfig(port=8000))      # binds, loads, prints the ready line, drains on SIGTERM

The OpenAI request/response surface is `api/`; the rest is the process
around it. Names are imported on first use (`ddtune --help` stays fast).
See docs/server.md "Server".

config.py      ServeConfig (flags / TOML), a pydantic model holding a DecodeParams
state.py       ServerState: lifecycle, live decoding config, identity, reports
worker.py      the single generation thread and its FIFO queue
api/           the OpenAI request and response bodies, endpoints, schema, errors
app.py         the FastAPI app and its admin endpoints
limits.py      ASGI body guard: size limit (413), read deadline (408), dropped uploads
jsonbody.py    strict JSON decoding of request bodies (depth, digits, lone surrogates)
metrics.py     Prometheus metrics in a per-app registry
identity.py    instance id, weight sha256, versions
lifecycle.py   process lifecycle: bind, load, ready line, drain on SIGTERM/SIGINT
listen.py      the listening socket (TCP_NODELAY on accepted connections), also `sweep watch`'s
commands.py    the `serve` subcommand (flags → ServeConfig)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddtune.lazy import lazy_names

if TYPE_CHECKING:
    from ddtune.server.app import create_app
    from ddtune.server.config import ServeConfig
    from ddtune.server.lifecycle import serve
    from ddtune.server.state import ServerState

__getattr__ = lazy_names(
    __name__,
    {"create_app": "app", "ServeConfig": "config", "serve": "lifecycle", "ServerState": "state"},
)

__all__ = ["ServeConfig", "ServerState", "create_app", "serve"]
