"""What a recording is asked for, torch-free: the requests to trace and the views to record.

`trace/record.py` (torch) records them; `trace/sources.py` and the sweep's
plan build them without loading the engine, so a core install (no
`ddtune[engine]`) can plan a sweep.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddtune.trace.files import TracedRequest, text_sha256


@dataclass(frozen=True)
class TraceRequest:
    """What to trace: one request as the bench (or the user) sends it."""

    workload: str
    prompt: str
    max_tokens: int
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    count: int = 1
    continuation: str | None = None  # a stored T = 0 output text (a sweep's baseline), if any
    continuation_ids: tuple[int, ...] | None = None  # the service's T = 0 token ids, if any

    def traced(self, key: str) -> TracedRequest:
        return TracedRequest(
            key=key,
            workload=self.workload,
            prompt_sha256=text_sha256(self.prompt),
            max_tokens=self.max_tokens,
            stop=self.stop,
            ignore_eos=self.ignore_eos,
            count=self.count,
        )


@dataclass(frozen=True)
class TraceSettings:
    windows: tuple[int | None, ...] = (None,)
    query_lengths: tuple[int, ...] = ()  # () = the drafter's block size
    topk_max: int = 8
    capture: str = "post-norm"
    block_too: bool = False  # the drafter's block size besides `query_lengths`
