"""The hostile-request table (issue 14): malformed, oversized and abusive requests.

Each case is sent as raw bytes to a live `ddtune serve` started with
`--max-request-bytes LIMIT` and must come back as a 4xx in the OpenAI error
shape with the listed status and `code` (and `param` where one is listed).
`tests/server/test_hostile.py` runs the table; the note of issue 14 lists the
outcome of every case before and after the hardening.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

LIMIT = 1_000_000  # --max-request-bytes of the server the table runs against
CONTEXT = 2048  # max_position_embeddings of the test checkpoint
C, CHAT, CONFIG = "/v1/completions", "/v1/chat/completions", "/v1/ddtree/config"


@dataclass(frozen=True)
class Case:
    name: str
    path: str
    body: bytes
    status: int
    code: str
    param: str | None = None
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    chunked: bool = False  # send the body with Transfer-Encoding: chunked


def j(value: object) -> bytes:
    return json.dumps(value).encode()


def deep(n: int, leaf: str = "1") -> str:
    return "[" * n + leaf + "]" * n


def deep_object(n: int) -> str:
    return '{"a":' * n + "1" + "}" * n


BIG_INT = "9" * 5000  # past Python's 4300-digit int limit
LARGE_INT = "9" * 101  # under Python's limit, over the server's
MSG = '"messages": [{"role": "user", "content": %s}]'

CASES = [
    # -- text that is JSON but not Unicode: lone surrogates -----------------------------------
    Case(
        "surrogate in prompt",
        C,
        b'{"prompt": "a \\ud800", "max_tokens": 2}',
        400,
        "invalid_value",
        "prompt",
    ),
    Case(
        "low surrogate in prompt",
        C,
        b'{"prompt": "\\udc00x", "max_tokens": 2}',
        400,
        "invalid_value",
        "prompt",
    ),
    Case(
        "surrogate in prompt list", C, b'{"prompt": ["\\ud83d"]}', 400, "invalid_value", "prompt[0]"
    ),
    Case(
        "surrogate in chat content",
        CHAT,
        (("{" + MSG + "}") % '"hi \\ud800"').encode(),
        400,
        "invalid_value",
        "messages[0].content",
    ),
    Case(
        "surrogate in chat part",
        CHAT,
        (("{" + MSG + "}") % '[{"type": "text", "text": "\\udfff"}]').encode(),
        400,
        "invalid_value",
        "messages[0].content[0].text",
    ),
    Case(
        "surrogate in stop",
        C,
        b'{"prompt": "a", "stop": ["\\ud800"]}',
        400,
        "invalid_value",
        "stop[0]",
    ),
    Case(
        "surrogate in model",
        C,
        b'{"prompt": "a", "model": "\\ud800"}',
        400,
        "invalid_value",
        "model",
    ),
    Case("surrogate as a key", C, b'{"prompt": "a", "\\ud800": 1}', 400, "invalid_value"),
    Case(
        "surrogate in user", C, b'{"prompt": "a", "user": "\\udbff"}', 400, "invalid_value", "user"
    ),
    # -- JSON that Python's parser cannot take -----------------------------------------------
    Case("array nested 100000 deep", C, deep(100_000).encode(), 400, "invalid_json"),
    Case("object nested 100000 deep", C, deep_object(100_000).encode(), 400, "invalid_json"),
    Case(
        "prompt nested 100000 deep",
        C,
        ('{"prompt": ' + deep(100_000, '"a"') + "}").encode(),
        400,
        "invalid_json",
    ),
    Case(
        "logit_bias nested 500 deep",
        C,
        ('{"prompt": "a", "logit_bias": ' + deep(500) + "}").encode(),
        400,
        "invalid_json",
    ),
    Case(
        "unknown field nested 200 deep",
        C,
        ('{"prompt": "a", "extra": ' + deep(200) + "}").encode(),
        400,
        "invalid_json",
    ),
    Case(
        "5000-digit max_tokens",
        C,
        ('{"prompt": "a", "max_tokens": ' + BIG_INT + "}").encode(),
        400,
        "invalid_json",
    ),
    Case("5000-digit token id", C, ('{"prompt": [' + BIG_INT + "]}").encode(), 400, "invalid_json"),
    Case(
        "5000-digit seed",
        C,
        ('{"prompt": "a", "seed": -' + BIG_INT + "}").encode(),
        400,
        "invalid_json",
    ),
    Case(
        "101-digit max_tokens",
        C,
        ('{"prompt": "a", "max_tokens": ' + LARGE_INT + "}").encode(),
        400,
        "invalid_json",
    ),
    Case(
        "101-digit temperature",
        C,
        ('{"prompt": "a", "temperature": ' + LARGE_INT + "}").encode(),
        400,
        "invalid_json",
    ),
    Case(
        "101-digit token id",
        C,
        ('{"prompt": [' + LARGE_INT + "]}").encode(),
        400,
        "invalid_json",
    ),
    Case("NaN temperature", C, b'{"prompt": "a", "temperature": NaN}', 400, "invalid_json"),
    Case("Infinity top_p", C, b'{"prompt": "a", "top_p": Infinity}', 400, "invalid_json"),
    Case(
        "-Infinity temperature",
        C,
        b'{"prompt": "a", "temperature": -Infinity}',
        400,
        "invalid_json",
    ),
    Case(
        "1e400 temperature",
        C,
        b'{"prompt": "a", "temperature": 1e400}',
        400,
        "invalid_value",
        "temperature",
    ),
    Case("invalid UTF-8", C, b'{"prompt": "\xff\xfe"}', 400, "invalid_json"),
    Case("UTF-16 body", C, '{"prompt": "a"}'.encode("utf-16"), 400, "invalid_json"),
    Case("UTF-8 BOM", C, b'\xef\xbb\xbf{"prompt": "a"}', 400, "invalid_json"),
    Case("NUL bytes", C, b"\x00\x00\x00", 400, "invalid_json"),
    Case("empty body", C, b"", 400, "invalid_json"),
    Case("truncated JSON", C, b'{"prompt": "x", ', 400, "invalid_json"),
    Case("trailing garbage", C, b'{"prompt": "x"} {"prompt": "y"}', 400, "invalid_json"),
    Case("null body", C, b"null", 400, "invalid_json"),
    Case("array body", CHAT, b"[]", 400, "invalid_json"),
    Case("string body", C, b'"prompt"', 400, "invalid_json"),
    # -- size: the body limit, the context, the fields that could grow work -------------------
    Case("body over the limit", C, j({"prompt": "x" * (LIMIT + 10)}), 413, "request_too_large"),
    Case(
        "chunked body over the limit",
        C,
        j({"prompt": "x" * (LIMIT + 10)}),
        413,
        "request_too_large",
        chunked=True,
    ),
    Case(
        "declared 10 MB, nothing sent",
        C,
        b"",
        413,
        "request_too_large",
        headers={"Content-Length": "10000000"},
    ),
    Case(
        "prompt longer than any context",
        C,
        j({"prompt": "y" * 200_000}),
        400,
        "context_length_exceeded",
        "prompt",
    ),
    Case(
        "chat longer than any context",
        CHAT,
        j({"messages": [{"role": "user", "content": "y" * 200_000}]}),
        400,
        "context_length_exceeded",
        "messages",
    ),
    Case(
        "20000 chat messages",
        CHAT,
        j({"messages": [{"role": "user", "content": "hi"}] * 20_000}),
        400,
        "context_length_exceeded",
        "messages",
    ),
    Case(
        "token ids past the context",
        C,
        j({"prompt": [3] * (CONTEXT + 1)}),
        400,
        "context_length_exceeded",
        "prompt",
    ),
    Case("negative token id", C, j({"prompt": [3, -1]}), 400, "invalid_value", "prompt"),
    Case(
        "token id past the vocabulary", C, j({"prompt": [3, 10**9]}), 400, "invalid_value", "prompt"
    ),
    Case(
        "max_tokens 10**12",
        C,
        j({"prompt": "a", "max_tokens": 10**12}),
        400,
        "context_length_exceeded",
        "max_tokens",
    ),
    Case(
        "max_tokens -1", C, j({"prompt": "a", "max_tokens": -1}), 400, "invalid_value", "max_tokens"
    ),
    Case(
        "100 stop strings",
        C,
        j({"prompt": "a", "stop": [f"s{i}" for i in range(100)]}),
        400,
        "invalid_value",
        "stop",
    ),
    Case(
        "100000-char stop string",
        C,
        j({"prompt": "a", "stop": "s" * 100_000}),
        400,
        "invalid_value",
        "stop",
    ),
    Case(
        "50000 logit_bias entries",
        C,
        j({"prompt": "a", "logit_bias": {str(i): 1 for i in range(50_000)}}),
        400,
        "unsupported_value",
        "logit_bias",
    ),
    Case("n 1000", C, j({"prompt": "a", "n": 1000}), 400, "unsupported_value", "n"),
    Case("seed 2**64", C, j({"prompt": "a", "seed": 2**64}), 400, "invalid_value", "seed"),
    Case(
        "100000-char model name",
        C,
        j({"prompt": "a", "model": "m" * 100_000}),
        404,
        "model_not_found",
        "model",
    ),
    Case(
        "prompt batch of token lists",
        C,
        j({"prompt": [[1, 2], [3, 4]]}),
        400,
        "unsupported_value",
        "prompt",
    ),
    Case(
        "prompt batch of strings", C, j({"prompt": ["a", "b"]}), 400, "unsupported_value", "prompt"
    ),
    Case("prompt an object", C, j({"prompt": {"text": "a"}}), 400, "invalid_value", "prompt"),
    Case("messages empty", CHAT, j({"messages": []}), 400, "invalid_value", "messages"),
    Case(
        "message role root",
        CHAT,
        j({"messages": [{"role": "root", "content": "x"}]}),
        400,
        "invalid_value",
        "messages[0].role",
    ),
    # -- the config endpoint: bounded by the model's context ----------------------------------
    Case("window ' 12 '", CONFIG, j({"window": " 12 "}), 400, "invalid_value", "window"),
    Case("window '12'", CONFIG, j({"window": "12"}), 400, "invalid_value", "window"),
    Case("window 2**30", CONFIG, j({"window": 2**30}), 400, "invalid_value", "window"),
    Case(
        "window past the context",
        CONFIG,
        j({"window": CONTEXT + 1}),
        400,
        "invalid_value",
        "window",
    ),
    Case("window 0", CONFIG, j({"window": 0}), 400, "invalid_value", "window"),
    Case("window true", CONFIG, j({"window": True}), 400, "invalid_value", "window"),
    Case("budget 10**6", CONFIG, j({"budget": 10**6}), 400, "invalid_value", "budget"),
    Case("mode a list", CONFIG, j({"mode": ["ddtree"]}), 400, "invalid_value", "mode"),
    Case(
        "config 5000-digit budget",
        CONFIG,
        ('{"budget": ' + BIG_INT + "}").encode(),
        400,
        "invalid_json",
    ),
    # -- methods and paths ------------------------------------------------------------------
    Case("GET on a POST endpoint", C, b"", 405, "http_405", method="GET"),
    Case("POST on a GET endpoint", "/v1/models", b"{}", 405, "http_405"),
    Case("unknown path", "/v1/engines", b"{}", 404, "http_404"),
]
