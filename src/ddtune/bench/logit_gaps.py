"""Logit gaps at T=0: how close each generated token was to its runner-up.

After the measured requests, a T=0 bench against a kind that `supports_logprobs`
asks once more, per measured request, for one non-streamed completion with
`logprobs: 2` (same prompt, max_tokens, seed and stops) and keeps, per token,
the top-1 minus top-2 logprob (nats) and the token's character offset. The
report uses them to classify a T=0 divergence as a near-tie or a real
divergence (docs/bench.md "Bench", docs/report.md "How the report is built").

One entry per measured request, in request order (None where the request
failed):

    {"offsets": [0, 3, ...], "gaps": [2.5, 0.01, ...], "agree": 57}

`gaps[i]` is None where fewer than two alternatives came back; `agree` is the
first character where this completion's text differs from the streamed
output's (its length when identical): a gap is only meaningful for tokens that
start at or before `agree`.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from ddtune.bench.client import RequestSpec
from ddtune.bench.lossless import first_difference
from ddtune.engines import ServerEngine

GapEntry = dict[str, Any]


def record_gaps(
    client: httpx.Client,
    base_url: str,
    engine: ServerEngine,
    model: str | None,
    specs: Sequence[RequestSpec],
    texts: Sequence[str],
    concurrency: int = 1,
    ignore_eos: bool = False,
) -> tuple[list[GapEntry | None], str | None]:
    """One gap entry per spec, plus a note when any request failed (the bench goes on)."""

    def one(item: tuple[RequestSpec, str]) -> GapEntry | str:
        try:
            return _one_gap(client, base_url, engine, model, *item, ignore_eos)
        except (httpx.HTTPError, ValueError, KeyError, TypeError, IndexError) as exc:
            return f"{item[0].workload} request {item[0].index}: {type(exc).__name__}: {exc}"

    items = list(zip(specs, texts, strict=True))
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        answers = list(pool.map(one, items))
    failures = [a for a in answers if isinstance(a, str)]
    note = (
        f"logit gaps missing for {len(failures)} of {len(answers)} requests (first: {failures[0]})"
        if failures
        else None
    )
    return [a if isinstance(a, dict) else None for a in answers], note


def _one_gap(
    client: httpx.Client,
    base_url: str,
    engine: ServerEngine,
    model: str | None,
    spec: RequestSpec,
    streamed: str,
    ignore_eos: bool,
) -> GapEntry:
    url, body = engine.generate_request(base_url, spec.prompt, spec.greedy(ignore_eos), model)
    body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    response = client.post(url, json={**body, "stream": False, "logprobs": 2})
    if response.status_code != 200:
        raise ValueError(f"HTTP {response.status_code}: {response.text[:200]}")
    choice = response.json()["choices"][0]
    return gap_entry(choice["logprobs"], choice.get("text") or "", streamed)


def gap_entry(logprobs: dict[str, Any], text: str, streamed: str) -> GapEntry:
    """The compact entry from a completions `logprobs` object (legacy OpenAI shape)."""
    tops = logprobs.get("top_logprobs") or []
    return {
        "offsets": [int(o) for o in logprobs.get("text_offset") or []],
        "gaps": [top_gap(top) for top in tops],
        "agree": first_difference(text, streamed) if text != streamed else len(text),
    }


def top_gap(top: dict[str, float] | None) -> float | None:
    """Top-1 minus top-2 logprob, rounded to 1e-4 nats; None with fewer than two."""
    values = sorted((float(v) for v in (top or {}).values()), reverse=True)
    return round(values[0] - values[1], 4) if len(values) >= 2 else None
