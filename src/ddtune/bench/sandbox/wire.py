"""Plain-data messages between the checker and the tested process (docs/bench.md "Sandbox").

Loaded by `harness.py` inside the sandbox: stdlib only. One message is one
JSON line. Values cross as plain data only (None, bool, int, float, complex,
str, bytes, list, tuple, dict, set, frozenset), so nothing the tested code
returns can carry its own `__eq__` into the checker: the checker compares
values it rebuilt itself. Decoding is strict and bounded (size, depth).

Tagged forms: big ints `{"i": hex}`, tuple `{"t": [...]}`, set `{"s": [...]}`,
frozenset `{"f": [...]}`, dict `{"d": [[k, v], ...]}`, bytes `{"b": hex}`,
complex `{"c": [re, im]}`; lists, small ints, floats (NaN/Infinity too),
str, bool and None are plain JSON.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False  # importing typing would cost every test run
if TYPE_CHECKING:
    from typing import Any, BinaryIO

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
PLAIN_INT = 2**53


class ChannelError(Exception):
    """A malformed or oversized message: the other side broke the protocol."""


def encode(value: object, depth: int = 0) -> Any:
    """`value` as JSON-able tagged data; TypeError for anything but plain data."""
    if depth > MAX_DEPTH:
        raise TypeError(f"value nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool):
        return None if value is None else bool(value)
    if isinstance(value, int):
        number = int(value)
        return number if -PLAIN_INT < number < PLAIN_INT else {"i": hex(number)}
    if isinstance(value, float | str):
        return float(value) if isinstance(value, float) else str(value)
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in value]
    return _encode_tagged(value, depth)


def _encode_tagged(value: object, depth: int) -> Any:
    if isinstance(value, tuple):
        return {"t": [encode(v, depth + 1) for v in value]}
    if isinstance(value, set | frozenset):
        tag = "f" if isinstance(value, frozenset) else "s"
        return {tag: [encode(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, bytes | bytearray):
        return {"b": bytes(value).hex()}
    if isinstance(value, complex):
        return {"c": [value.real, value.imag]}
    raise TypeError(
        f"a {type(value).__name__} cannot cross the sandbox boundary; "
        "only plain data (numbers, str, bytes, list, tuple, dict, set) can"
    )


def decode(data: Any, depth: int = 0) -> Any:
    """Rebuild a value from `encode`'s output; ChannelError on anything else."""
    if depth > MAX_DEPTH:
        raise ChannelError(f"value nested deeper than {MAX_DEPTH} levels")
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is list:
        return [decode(v, depth + 1) for v in data]
    if type(data) is dict and len(data) == 1:
        ((tag, body),) = data.items()
        try:
            return _decode_tagged(tag, body, depth)
        except (TypeError, ValueError) as exc:
            raise ChannelError(f"bad {tag!r} value: {exc}") from None
    raise ChannelError(f"not a plain value: {str(data)[:80]}")


def _decode_tagged(tag: str, body: Any, depth: int) -> Any:
    if tag in ("i", "b") and type(body) is str:
        return int(body, 16) if tag == "i" else bytes.fromhex(body)
    if tag == "c" and type(body) is list and len(body) == 2:
        return complex(float(body[0]), float(body[1]))
    if type(body) is not list:
        raise ValueError("expected a list")
    items = [decode(v, depth + 1) for v in body]
    if tag == "t":
        return tuple(items)
    if tag in ("s", "f"):
        return set(items) if tag == "s" else frozenset(items)
    if tag == "d" and all(type(p) is list and len(p) == 2 for p in items):
        return {k: v for k, v in items}
    raise ValueError("unknown tag or shape")


def dumps(message: dict[str, Any]) -> bytes:
    """One message as a JSON line; ValueError when it exceeds MAX_MESSAGE_BYTES."""
    data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
    if len(data) > MAX_MESSAGE_BYTES:
        raise ValueError(
            f"a message larger than {MAX_MESSAGE_BYTES} bytes cannot cross the sandbox"
        )
    return data


def write(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd`."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def receive(stream: BinaryIO) -> dict[str, Any] | None:
    """The next message from `stream`; None at end of stream."""
    line = stream.readline(MAX_MESSAGE_BYTES + 1)
    if not line:
        return None
    if len(line) > MAX_MESSAGE_BYTES or not line.endswith(b"\n"):
        raise ChannelError(f"message larger than {MAX_MESSAGE_BYTES} bytes or cut short")
    try:
        message = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ChannelError(f"not a JSON message: {type(exc).__name__}") from None
    if type(message) is not dict:
        raise ChannelError("a message must be a JSON object")
    return message
