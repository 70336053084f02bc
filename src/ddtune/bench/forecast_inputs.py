"""What one bench of the baseline measures for a forecast: its token paths and forward probes.

    paths, note = record_paths(client, plan, specs)     # T = 0: each request's token ids
    probes, note = probe_forward(client, plan, paths)   # seconds of a forward over n tokens

Both run after the measured requests, non-streamed, on an engine that answers with
token ids (`ServerEngine.returns_token_ids`: vLLM's `return_token_ids`, ddtune's
server), and never fail the bench: what could not be measured is a note.

Token paths: per measured short and long request, the ids of its prompt and of
its T = 0 answer, asked once more as the stream asked it. At T = 0 they are the
target's greedy path, from which n-gram (prompt lookup) speculation's rounds
follow exactly (`ddtune.trace.ngram`), whatever the method proposes.

Forward probes: a completion of one token over a prompt of n token ids takes a
forward over n tokens (plus what every request costs): timed for each n of
`[bench] forward_probes`, three prompts each, every prompt a different slice of
the recorded ids (so no prefix cache serves one from another). What a round's
verify forward over n tokens costs beyond one token, F(n), is the difference to
n = 1 (`ddtune.trace.round_cost.Forward`), measured on the running baseline,
without a restart. Results: `BenchResult.token_paths`, `BenchResult.forward_probes`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import httpx

from ddtune.bench.client import RequestSpec
from ddtune.engines import ServerEngine
from ddtune.params import SamplingParams

PATH_WORKLOADS = ("short", "long")  # the throughput workloads a forecast predicts
PROBE_REPEATS = 3  # prompts timed per probed length
FAILURES = (httpx.HTTPError, ValueError, KeyError, TypeError, IndexError)
LOOKAHEAD = 16  # tokens past max_tokens a path records: the most a last round may draft


def record_paths(
    client: httpx.Client,
    base_url: str,
    engine: ServerEngine,
    model: str | None,
    specs: Sequence[RequestSpec],
    ignore_eos: bool,
) -> tuple[list[dict[str, Any]], str | None]:
    """[{"workload", "prompt_ids", "output_ids", "max_tokens", "count"}] per plain short/long
    request (each once, `count`: how often the bench sends it), and a note when some could
    not be recorded."""
    wanted = [s for s in specs if s.workload in PATH_WORKLOADS and not s.messages]
    sends: dict[tuple[Any, ...], list[RequestSpec]] = {}  # a repeated request: one path
    for spec in wanted:
        key = (spec.workload, spec.prompt, spec.max_tokens, spec.seed, spec.stop)
        sends.setdefault(key, []).append(spec)
    paths, failures = [], []
    for spec, *again in sends.values():
        try:
            choice = _greedy_ids(client, base_url, engine, model, spec, ignore_eos)
            prompt, output = _ids(choice, "prompt_token_ids"), _ids(choice, "token_ids")
        except FAILURES as exc:
            failures.append(f"{spec.workload} request {spec.index}: {type(exc).__name__}: {exc}")
            continue
        paths.append(
            {"workload": spec.workload, "prompt_ids": prompt, "output_ids": output}
            | {"max_tokens": spec.max_tokens, "count": 1 + len(again)}
        )
    return paths, _note("token paths", failures, len(sends))


def _greedy_ids(
    client: httpx.Client,
    base_url: str,
    engine: ServerEngine,
    model: str | None,
    spec: RequestSpec,
    ignore_eos: bool,
) -> dict[str, Any]:
    """The request asked again at T = 0, `LOOKAHEAD` tokens longer: a round that ends the
    answer counts its drafts whole (vLLM's counters do), so the path must show what lies past
    `max_tokens`; where that does not fit the context, as the bench asked it."""
    sampling = spec.greedy(ignore_eos)
    longer = dataclasses.replace(sampling, max_new_tokens=spec.max_tokens + LOOKAHEAD)
    try:
        return _post(client, *engine.ids_request(base_url, spec.prompt, longer, model))
    except ValueError:
        return _post(client, *engine.ids_request(base_url, spec.prompt, sampling, model))


def probe_forward(
    client: httpx.Client,
    base_url: str,
    engine: ServerEngine,
    model: str | None,
    paths: Sequence[dict[str, Any]],
    sizes: Sequence[int],
) -> tuple[list[dict[str, Any]], str | None]:
    """[{"tokens": n, "seconds": s}]: one-token completions over n-token prompts, each a
    different slice of the recorded ids; a note when some could not be timed."""
    ids = [t for p in paths for t in (*p["prompt_ids"], *p["output_ids"])]
    if not sizes:
        return [], None
    needed = (max(sizes) + 1) * PROBE_REPEATS
    if len(ids) < needed:
        return [], f"forward probes skipped: {len(ids)} recorded token ids, {needed} needed"
    sampling = SamplingParams(max_new_tokens=1, temperature=0.0, ignore_eos=True)
    probes, failures, offset = [], [], 0
    for n in sorted(sizes):
        for _ in range(PROBE_REPEATS):
            offset = (offset + n + 1) % (len(ids) - n)  # a fresh slice: no cached prefix
            url, body = engine.ids_request(base_url, ids[offset : offset + n], sampling, model)
            started = time.perf_counter()
            try:
                _post(client, url, body)
            except FAILURES as exc:
                failures.append(f"{n} tokens: {type(exc).__name__}: {exc}")
                continue
            probes.append({"tokens": n, "seconds": time.perf_counter() - started})
    return probes, _note("forward probes", failures, len(sizes) * PROBE_REPEATS)


def _post(client: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(url, json=body)
    if response.status_code != 200:
        raise ValueError(f"HTTP {response.status_code}: {response.text[:200]}")
    choice = response.json()["choices"][0]
    if not isinstance(choice, dict):
        raise TypeError(f"a choice that is not an object: {choice!r}")
    return choice


def _ids(choice: dict[str, Any], key: str) -> list[int]:
    ids = choice.get(key)
    if not isinstance(ids, list) or not all(type(i) is int for i in ids):
        raise ValueError(f"the answer has no {key} list of integers")
    return ids


def _note(what: str, failures: list[str], total: int) -> str | None:
    if not failures:
        return None
    return f"{what} missing for {len(failures)} of {total} (first: {failures[0]})"


__all__ = ["PATH_WORKLOADS", "PROBE_REPEATS", "probe_forward", "record_paths"]
