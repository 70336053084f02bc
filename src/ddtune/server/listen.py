"""The listening socket of `ddtune serve` and `ddtune sweep watch`, bound before anything loads.

    sock = bind("127.0.0.1", 8000)        # a UserError naming the port when it is taken
    uvicorn.Server(config).serve(sockets=[sock])

The socket is made with `IPPROTO_TCP` spelled out: asyncio sets `TCP_NODELAY` on
the connections it accepts only when their listener says it is TCP, and without
it Nagle's algorithm and delayed ACKs hold a small keep-alive reply for ~40 ms.
"""

from __future__ import annotations

import socket

from ddtune.errors import UserError


def bind(host: str, port: int, backlog: int = 2048) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(
            f"cannot listen on {host}:{port}: {exc.strerror}; pick another --port"
        ) from None
    sock.listen(backlog)
    return sock


__all__ = ["bind"]
