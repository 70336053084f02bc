"""`BenchResult`: one run's JSON document, per-request samples and aggregates.

Aggregates use the shared metric names (`ddtune.records.METRIC_NAMES`), and
`workloads` the per-workload ones (`ddtune.records.WORKLOAD_METRICS`):
short_tps / long_tps (decode tokens/s pooled over the requests: their tokens after the
first over their time after the first token, see `pooled_decode_rate`), short_ttft_s /
long_ttft_s (mean), acceptance_length (pooled over the measured requests, None
when unavailable), coding_passed / coding_total (samples); extras:
short_e2e_s, long_e2e_s, short_itl_s, long_itl_s, the same four for coding
(coding_tps, ...), short/long/coding_acceptance_length (each workload pooled on
its own: coding prompts accept far more than the stdlib slices), pass_at_1,
pass_at_<n>, acceptance_length_request_mean, requests.
With `[bench.load]`, `load_result` holds the per-level figures, the measured
per-request rows and the max-rate search (`ddtune.bench.load.generator.LoadResult`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from statistics import fmean
from typing import Any

from ddtune.bench.client import StreamRecord
from ddtune.bench.lossless import output_hash

RENAMED = {"server_kind": "engine"}  # fields of results stored before the rename


@dataclass
class BenchResult:
    base_url: str = ""
    engine: str = ""  # the server's engine (`ddtune.engines`)
    model: str | None = None
    matrix: dict[str, Any] = field(default_factory=dict)
    identity: dict[str, Any] | None = None
    hardware: dict[str, Any] = field(default_factory=dict)
    hardware_fingerprint: str = ""
    prompt_set_hash: str = ""
    prompt_source: str = ""
    temperature: float = 0.0
    started_at: float = 0.0  # unix time
    duration_s: float = 0.0
    samples: list[dict[str, Any]] = field(default_factory=list)
    aggregates: dict[str, float | int | None] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)  # texts in request order (T=0: losslessness)
    acceptance_source: str | None = None  # "usage.spec" | "meta_info" | "prometheus" | None
    notes: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    prompts: dict[str, list[str]] = field(default_factory=dict)  # {"short": [...], "long": [...]}
    # T=0 with a logprobs-capable engine: per request {"offsets", "gaps", "agree"} (bench.logit_gaps)
    logprob_gaps: list[dict[str, Any] | None] | None = None
    load_result: dict[str, Any] | None = (
        None  # [bench.load]: LoadResult.to_dict(), bench/load/generator.py
    )
    # per workload (bench/suites/figures.py): {"humaneval": {"tps": ..., "passed": ...}, ...}
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)
    suites: dict[str, dict[str, Any]] = field(
        default_factory=dict
    )  # where each suite's data came from
    # `[bench] token_paths`: per short/long request its prompt and T = 0 answer ids
    token_paths: list[dict[str, Any]] | None = None
    forward_probes: list[dict[str, Any]] | None = None  # [{"tokens", "seconds"}]
    # a counting engine (vLLM): {"drafts", "accepted_per_position"} over the measured requests
    draft_counts: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchResult:
        known = {f.name for f in fields(cls)}
        data = {RENAMED.get(k, k): v for k, v in data.items()}
        return cls(**{k: v for k, v in data.items() if k in known})

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")

    @classmethod
    def read(cls, path: str | Path) -> BenchResult:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


# A stream whose tokens after the first all arrived within this long was sent at once (the
# server buffered it, e.g. a front end short of CPU): its decode time is not measured by the
# client, and (tokens - 1) / ~0 s reads as tens of thousands of tokens/s.
MIN_DECODE_S = 1e-3
# ... and so was one whose chunks after the first came less than this apart on average: no
# engine runs a forward and streams its tokens in 200 µs (vLLM's front end on a busy CPU
# flushed a stream's 47 chunks within 1.2 ms, 26 µs apart, after holding them for 0.15 s).
MIN_CHUNK_GAP_S = 2e-4


def make_sample(
    workload: str, index: int, record: StreamRecord, acceptance: float | None
) -> dict[str, Any]:
    """One per-request row; decode figures exclude the first token (time to it is TTFT).

    `sent_at_once` marks a stream whose decode took under `MIN_DECODE_S`, or under
    `MIN_CHUNK_GAP_S` a chunk (see `pooled_decode_rate`).
    """
    ttft = record.ttft_s
    n = record.output_tokens
    decode_s = record.e2e_s - ttft if ttft is not None and n > 1 else None
    itl = decode_s / (n - 1) if decode_s else None
    return {
        "workload": workload,
        "index": index,
        "ttft_s": ttft,
        "itl_s": itl,
        "e2e_s": record.e2e_s,
        "output_tokens": n,
        "tokens_counted_by": record.tokens_counted_by,
        "prompt_tokens": record.prompt_tokens,
        "decode_tps": (n - 1) / decode_s if decode_s else None,
        "sent_at_once": decode_s is not None
        and decode_s < max(MIN_DECODE_S, MIN_CHUNK_GAP_S * (len(record.chunk_times_s) - 1)),
        "chunks": len(record.chunk_times_s),
        "finish_reason": record.finish_reason,
        "acceptance_length": acceptance,
        "sent_at": record.sent_at,
        "fingerprint": record.fingerprint,  # the server's config + generation (ddtune)
        "text": record.text,
        "sha256": output_hash(record.text),
        "passed": None,
        "fail_reason": None,
    }


def throughput_aggregates(samples: list[dict[str, Any]]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for workload in ("short", "long", "coding"):
        rows = [s for s in samples if s["workload"] == workload]
        out[f"{workload}_tps"] = pooled_decode_rate(rows, samples)
        out[f"{workload}_ttft_s"] = _mean(s["ttft_s"] for s in rows)
        out[f"{workload}_e2e_s"] = _mean(s["e2e_s"] for s in rows)
        out[f"{workload}_itl_s"] = _mean(s["itl_s"] for s in rows)
    return out


def pooled_decode_rate(
    rows: list[dict[str, Any]], bench: list[dict[str, Any]] | None = None
) -> float | None:
    """Decode tokens/s of a workload: the tokens after the first over the seconds after the
    first token, summed over its requests that have decode figures; `bench`: every request of
    the bench the workload ran in (default `rows`), whose first tokens bound a prefill.

    A ratio of sums, not a mean of per-request rates, and streams held back are left out
    while any other stream was timed (`held_back`): one such request would otherwise read as
    thousands of tokens/s. When every stream was held back (a front end that held the whole
    answer back, or a server that answers instantly), their decode happened before the first
    chunk: they count over their whole time, request to last token (a rate no higher than
    the true one, where the burst's would be 100 times it).
    """
    timed = [s for s in rows if s.get("decode_tps")]
    steady = [s for s, held in zip(timed, held_back(timed, bench), strict=True) if not held]
    if steady:
        seconds = sum((s["output_tokens"] - 1) / s["decode_tps"] for s in steady)
    else:
        steady, seconds = timed, sum(s["e2e_s"] for s in timed)
    return sum(s["output_tokens"] - 1 for s in steady) / seconds if seconds > 0 else None


def held_back(rows: list[dict[str, Any]], bench: list[dict[str, Any]] | None = None) -> list[bool]:
    """Per stream of `rows` (each with decode figures): whether the server held it back and
    sent its tokens late. At once, or with its first token later than its prefill explains by
    more than the stream's whole decode took: its decode happened before it was sent. Its
    prefill is bounded by the first token of another stream of the bench (`bench`, default
    `rows`: any workload's, the same server serving them one after the other), scaled up by
    how much longer its own prompt is (a stream of unknown prompt size is judged only by "at
    once"). Measured: vLLM's front end on a busy CPU sent 3 of 4 streams' 47 tokens 2-33 ms
    after a first token at 0.19-0.24 s, while the fourth's first token came after 0.02 s
    (prompts of 65-87 tokens); and in another bench all 4 short streams' first tokens came
    after 0.19-0.32 s, 3 at once and the fourth's 47 tokens within 51 ms, while the long
    workload's 233-300-token prompts got theirs after 0.023-0.027 s.
    """
    sized = [
        (r["prompt_tokens"], r["ttft_s"])
        for r in (rows if bench is None else bench)
        if r.get("prompt_tokens") and r.get("ttft_s") is not None
    ]

    def prefill_bound(size: int) -> float:
        return min((ttft * max(1.0, size / other) for other, ttft in sized), default=math.inf)

    return [
        bool(r.get("sent_at_once"))
        or (
            bool(r.get("prompt_tokens"))
            and r["ttft_s"] - prefill_bound(r["prompt_tokens"])
            > (r["output_tokens"] - 1) / r["decode_tps"]
        )
        for r in rows
    ]


def _mean(values: Any) -> float | None:
    present = [v for v in values if v is not None]
    return fmean(present) if present else None
