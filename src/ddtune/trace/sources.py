"""What a trace records: the requests of a bench matrix, or prompts given on the command line.

    requests_from_matrix(matrix)                       # what `run_bench` measures, in order
    requests_from_prompts(["def f(x):"], max_tokens=64)
    requests_from_prompts_file(path, max_tokens=64)    # the bench's prompts JSONL

Identical requests (a bench's repeats) are traced once and counted (`count`),
so a predicted acceptance length pools them as the bench pools its responses.
A sweep store's baseline outputs (`trace record --store`) are read by
`ddtune.cli.trace`, which knows the store. See docs/traces.md "Traces".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ddtune.bench.matrix import BenchMatrix
from ddtune.bench.prompts import read_prompts_file
from ddtune.bench.runner import measured_requests
from ddtune.errors import UserError
from ddtune.trace.requests import TraceRequest


def requests_from_matrix(matrix: BenchMatrix) -> tuple[list[TraceRequest], str]:
    """The bench's measured requests (deduplicated, counted) and its prompt-set hash."""
    prompts, specs = measured_requests(matrix)
    requests = [
        TraceRequest(spec.workload, spec.prompt, spec.max_tokens, spec.stop, matrix.ignore_eos)
        for spec in specs
    ]
    return counted(requests), prompts.hash()


def requests_from_prompts(
    prompts: Sequence[str], max_tokens: int, workload: str = "prompt", ignore_eos: bool = False
) -> list[TraceRequest]:
    if max_tokens < 1:
        raise UserError(f"--max-tokens must be at least 1; got {max_tokens}")
    if not prompts:
        raise UserError("nothing to trace: give --prompt TEXT, --prompts-file F or --spec SPEC")
    return counted([TraceRequest(workload, p, max_tokens, (), ignore_eos) for p in prompts])


def requests_from_prompts_file(
    path: Path, max_tokens: int, ignore_eos: bool = False
) -> list[TraceRequest]:
    """The bench's prompts JSONL ({"prompt": ..., "workload": "short" | "long"} per line)."""
    prompts = read_prompts_file(path)
    requests = []
    for workload, texts in (("short", prompts.short), ("long", prompts.long)):
        if texts:
            requests += requests_from_prompts(texts, max_tokens, workload, ignore_eos)
    return requests


def counted(requests: Sequence[TraceRequest]) -> list[TraceRequest]:
    """One request per distinct (workload, prompt, max tokens, stops), with its count."""
    seen: dict[tuple[object, ...], TraceRequest] = {}
    for request in requests:
        key = (request.workload, request.prompt, request.max_tokens, request.stop)
        old = seen.get(key)
        seen[key] = request if old is None else _more(old)
    return list(seen.values())


def _more(request: TraceRequest) -> TraceRequest:
    from dataclasses import replace

    return replace(request, count=request.count + 1)


__all__ = [
    "counted",
    "requests_from_matrix",
    "requests_from_prompts",
    "requests_from_prompts_file",
]
