"""A raw HTTP/1.1 client for the limits tests: it can lie about Content-Length, send a
body chunked, slowly or only in part, and stops sending once the server has answered
(as curl does), so a 413 sent before the body ends is read rather than lost."""

from __future__ import annotations

import http.client
import select
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes
    sent: int  # body bytes the client managed to send before the answer


def connect(port: int, timeout: float = 60.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        "Host: 127.0.0.1",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def request(
    port: int,
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    chunked: bool = False,
    piece: int = 65536,
    pause: float = 0.0,
    timeout: float = 60.0,
) -> RawResponse:
    """Send one request; `pause` seconds between body pieces."""
    given = {"Content-Type": "application/json", **(headers or {})}
    if chunked:
        given["Transfer-Encoding"] = "chunked"
    elif not any(k.lower() == "content-length" for k in given):
        given["Content-Length"] = str(len(body))
    with connect(port, timeout) as sock:
        sock.sendall(head(method, path, given))
        sent = _send_body(sock, body, chunked, piece, pause)
        response = http.client.HTTPResponse(sock)
        response.begin()
        data = response.read()
        return RawResponse(response.status, dict(response.getheaders()), data, sent)


def _send_body(sock: socket.socket, body: bytes, chunked: bool, piece: int, pause: float) -> int:
    sent = 0
    try:
        for part in _pieces(body, piece):
            if answered(sock):
                return sent
            sock.sendall(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
            sent += len(part)
            if pause:
                time.sleep(pause)
        if chunked and not answered(sock):
            sock.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server closed early; its answer is still in our receive buffer
    return sent


def answered(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


def _pieces(body: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]
