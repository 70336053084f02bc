"""The user's own traffic: a JSONL of OpenAI request bodies, checked, sampled and replayed.

One body per line, as a proxy or gateway logs it: a completion (`prompt`) or a
chat (`messages`), optionally wrapped as `{"body": {...}}`. Each is replayed at
its own endpoint with its own sampling parameters and max tokens (only
`model`, `stream` and `stream_options` are set; `temperature` only when
`[bench.traffic] temperature` is a number). A bad line is a `UserError`
naming the line and what is wrong, and how many lines before it are valid;
nothing is sent before the whole file passed. `limit` lines are drawn by the
bench seed. Prompts and answers are not kept unless `store_prompts = true`:
samples carry the prompt's sha256 and length, the answer's sha256.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddtune.bench.client import RequestSpec
from ddtune.bench.lossless import output_hash
from ddtune.bench.suites.config import TrafficTable
from ddtune.bench.suites.items import seeded_subset
from ddtune.bench.suites.names import TRAFFIC
from ddtune.errors import UserError
from ddtune.jsonl import jsonl_rows

ROLES = ("system", "user", "assistant", "tool", "developer")
OPENAI_DEFAULT_TEMPERATURE = 1.0  # what the API (and `ddtune serve`) samples at when unset
SAMPLED = "(sampled at T = {:g}: not compared)"


@dataclass(frozen=True)
class LoggedRequest:
    line: int
    body_json: str  # the body as replayed (temperature overridden when asked)
    chat: bool
    max_tokens: int  # 0: the body names none (the server's default applies)


def read_traffic(path: str | Path) -> list[LoggedRequest]:
    """Every line of the traffic file, checked; a bad line stops with its number."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"bench.traffic_file {path} does not exist", key="bench.traffic_file")
    requests: list[LoggedRequest] = []
    try:
        for number, row in jsonl_rows(path):
            requests.append(_logged(row, number, f"{path}:{number}"))
    except UserError as exc:
        raise UserError(
            f"{exc} ({len(requests)} valid request(s) before it); fix or remove that line",
            key="bench.traffic_file",
        ) from None
    if not requests:
        raise UserError(f"bench.traffic_file {path} holds no requests", key="bench.traffic_file")
    return requests


def traffic_requests(
    logged: list[LoggedRequest], table: TrafficTable, seed: int
) -> list[RequestSpec]:
    """The sampled lines as measured requests of the `traffic` workload."""
    chosen = seeded_subset(logged, table.limit, seed, TRAFFIC)
    temperature = table.temperature
    return [
        RequestSpec(TRAFFIC, i, "", r.max_tokens, body_json=_with_temperature(r, temperature))
        for i, r in enumerate(chosen)
    ]


def private_sample(sample: dict[str, Any], spec: RequestSpec, store_prompts: bool) -> str:
    """Hash and length of the prompt into a traffic sample; without `store_prompts` the
    answer's text leaves it too. Returns what `outputs` keeps for the request: a sampled
    answer (T > 0, as logged) is not a lossless config's to reproduce, so it keeps a
    placeholder every config shares and the T = 0 comparison skips it."""
    body = json.loads(spec.body_json or "{}")
    prompt = json.dumps(body.get("messages", body.get("prompt")), ensure_ascii=False)
    sample["prompt_sha256"] = hashlib.sha256(prompt.encode()).hexdigest()[:16]
    sample["prompt_chars"] = len(prompt)
    temperature = replayed_temperature(body)
    kept = SAMPLED.format(temperature) if temperature > 0 else None
    if store_prompts:
        sample["prompt"] = body.get("messages", body.get("prompt"))
        return kept or str(sample["text"])
    sample["text"] = ""
    return kept or f"sha256:{sample['sha256'] or output_hash('')}"


def replayed_temperature(body: dict[str, Any]) -> float:
    """The temperature a replayed body is sampled at: its own, or OpenAI's default of 1."""
    value = body.get("temperature")
    return OPENAI_DEFAULT_TEMPERATURE if value is None else float(value)


def _with_temperature(request: LoggedRequest, temperature: float | str) -> str:
    if isinstance(temperature, str):  # "logged"
        return request.body_json
    return json.dumps({**json.loads(request.body_json), "temperature": temperature})


def _logged(row: Any, line: int, where: str) -> LoggedRequest:
    body = row.get("body") if isinstance(row, dict) and isinstance(row.get("body"), dict) else row
    if not isinstance(body, dict):
        raise UserError(f"{where}: expected a JSON object (an OpenAI request body)")
    chat = "messages" in body
    if chat:
        _check_messages(body["messages"], where)
    elif not isinstance(body.get("prompt"), str) or not body["prompt"]:
        raise UserError(f"{where}: neither a chat (messages) nor a completion (a string prompt)")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (not _is_int(max_tokens) or max_tokens < 1):
        raise UserError(f"{where}: max_tokens must be a positive integer; got {max_tokens!r}")
    _check_sampling(body, where)
    return LoggedRequest(line, json.dumps(body), chat, max_tokens or 0)


def _check_messages(messages: Any, where: str) -> None:
    if not isinstance(messages, list) or not messages:
        raise UserError(f"{where}: messages must be a non-empty list")
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ROLES:
            raise UserError(f"{where}: messages[{i}].role must be one of {', '.join(ROLES)}")
        content = message.get("content")
        if not isinstance(content, str | list) and not (content is None and role == "assistant"):
            raise UserError(f"{where}: messages[{i}].content must be a string; got {content!r}")


def _check_sampling(body: dict[str, Any], where: str) -> None:
    for key, low, high in (("temperature", 0.0, 2.0), ("top_p", 0.0, 1.0)):
        value = body.get(key)
        if value is not None and not (_is_number(value) and low <= value <= high):
            raise UserError(f"{where}: {key} must be a number in [{low}, {high}]; got {value!r}")
    if body.get("n", 1) != 1:
        raise UserError(f"{where}: n = {body['n']!r}: replay sends one answer per request")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
