"""Traces: predict every config's acceptance at T = 0 from one recording, then confirm.

At temperature 0 a lossless config commits the target's greedy path whatever
its budget, topk or chain length, and a DFlash drafter's per-depth marginals
at a position depend only on the context before it (and its window). So one
recording per window of the drafter's top-K along that path fixes every
config's rounds exactly, replayed with the engine's own tree code.

Reading order: `files` (the folder: a JSON header, one safetensors file per
request), `record` (`ddtune trace record`: continuation, teacher-forced
features, the drafter at every position), `hf` (a Hugging Face target through
`transformers`), `sources` (what to trace: a bench matrix, prompts), `replay`
(one request's rounds under one config, torch-free), `predict` (`Trace`,
`Prediction`; `ddtune trace predict`), `landscape` (acceptance over budget x
topk per window), `round_cost` (seconds per round from measured trials: predicted
tok/s with an interval), `ngram` (vLLM's n-gram exactly from the greedy path),
`chains/` (chain methods' τ at every smaller K from one run's per-position
acceptance counts: an estimate, with its error against measured). The CLI
lives in `ddtune.cli.trace` (it reads sweep specs and stores). Torch loads
only for recording. See docs/traces.md "Traces".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddtune.lazy import lazy_names

if TYPE_CHECKING:
    from ddtune.trace.files import TraceHeader, read_header
    from ddtune.trace.predict import Prediction, Trace
    from ddtune.trace.record import OwnTarget, record_trace
    from ddtune.trace.requests import TraceRequest, TraceSettings

__getattr__ = lazy_names(
    __name__,
    {
        "TraceHeader": "files",
        "read_header": "files",
        "Prediction": "predict",
        "Trace": "predict",
        "OwnTarget": "record",
        "TraceRequest": "requests",
        "TraceSettings": "requests",
        "record_trace": "record",
    },
)

__all__ = [
    "OwnTarget",
    "Prediction",
    "Trace",
    "TraceHeader",
    "TraceRequest",
    "TraceSettings",
    "read_header",
    "record_trace",
]
