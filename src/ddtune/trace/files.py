"""A trace folder on disk: one JSON header, one safetensors file per traced request.

    DIR/trace.json            TraceHeader: what was traced (models, capture rule,
                              windows, query lengths, K, requests), written first
    DIR/requests/rNNNN.safetensors
        tokens                int32 [P + N]   prompt + the target's greedy continuation
        <view>.top_lp         float32 [N, D, K]  per root position p = P + i and depth
        <view>.top_ids        int32   [N, D, K]  d = 1..D (D = query length - 1): the
                                                 drafter's K most likely tokens, sorted
        <view>.target_rank    int32   [N, D]     rank of the greedy token tokens[p + d]
        <view>.target_lp      float32 [N, D]     (-1 / nan where it is not recorded)
        metadata: prompt_tokens, finish (tokens emitted when the output ends),
                  completion_tokens, greedy_mismatches (continuation tokens the
                  teacher-forced argmax disagrees with: near-ties, or another engine's)

A view is one drafter context: `w<window>.q<query length>` (`view_name`). A
request file is written whole (atomically) once its request is traced, so a
killed `trace record` resumes at the first missing file, and the header says
whether a folder holds what a new command would record (`header_differences`).
Read with numpy only: replaying a trace needs no torch. See
docs/traces.md "Traces".
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from ddtune.errors import UserError
from ddtune.params import WINDOW_NONE, window_to_wire
from ddtune.report.render.atomic import atomic_path, write_atomic

FORMAT = "ddtune-trace"
VERSION = 1
HEADER = "trace.json"
CAPTURES = ("post-norm", "pre-norm")  # the last target layer after / before the final norm


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelInfo(Model):
    """One model folder as traced: where, its fingerprint (`ddtune.fingerprint`: config,
    tokenizer, index, shard headers; what binds a trace to a spec's models) and, for a
    ddtune folder, its weights' full sha256 (as ddtune's `/server_info` reports it)."""

    path: str
    sha256: str | None
    fingerprint: str | None = None  # None: recorded before fingerprints


class TracedRequest(Model):
    """One request of the traced workload (the prompt itself is in its file as tokens)."""

    key: str  # file stem, r0000, ...
    workload: str  # short | long | coding | prompt
    prompt_sha256: str
    max_tokens: int
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    count: int = 1  # identical requests the bench sends (repeats)


class TraceHeader(Model):
    format: str = FORMAT
    version: int = VERSION
    target: ModelInfo
    drafter: ModelInfo
    tokenizer_sha256: str
    capture: str  # CAPTURES
    backend: str  # ddtune | transformers
    dtype: str
    block_size: int
    target_layer_ids: tuple[int, ...]
    max_context: int
    windows: tuple[int | str, ...]  # wire form: ints and "none"
    query_lengths: tuple[int, ...]
    topk_max: int
    requests: tuple[TracedRequest, ...]
    source: str  # "engine" (own greedy decode) or "store:<path>" (a sweep's baseline outputs)
    prompt_set_hash: str | None = None  # the bench's, when traced from a sweep spec

    def window_values(self) -> list[int | None]:
        return [None if w == WINDOW_NONE else int(w) for w in self.windows]


@dataclass
class RequestData:
    """One traced request, read back (numpy arrays)."""

    request: TracedRequest
    tokens: np.ndarray  # [P + N] int
    prompt_tokens: int
    finish: int  # tokens emitted when the output ends (stop token / stop string / max_tokens)
    completion_tokens: int  # what the server reports (`usage.completion_tokens`)
    views: dict[str, dict[str, np.ndarray]]  # view name -> top_lp, top_ids, target_rank, target_lp
    greedy_mismatches: int = 0  # continuation tokens the teacher-forced argmax disagrees with

    @property
    def generated(self) -> np.ndarray:
        """The greedy continuation [N]; row i of a view has root generated[i]."""
        return self.tokens[self.prompt_tokens :]


def view_name(window: int | None, query_length: int) -> str:
    return f"w{window_to_wire(window)}.q{query_length}"


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def request_path(folder: Path, key: str) -> Path:
    return folder / "requests" / f"{key}.safetensors"


def write_header(folder: Path, header: TraceHeader) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "requests").mkdir(exist_ok=True)
    write_atomic(folder / HEADER, header.model_dump_json(indent=2) + "\n")


def read_header(folder: Path) -> TraceHeader:
    path = Path(folder) / HEADER
    if not path.is_file():
        raise UserError(
            f"{folder} is not a trace (no {HEADER}); record one with `ddtune trace record`"
        )
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: not a readable trace header ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UserError(f"{path}: not a ddtune trace header")
    if data.get("version") != VERSION:
        raise UserError(
            f"{path}: trace format version {data.get('version')}, this ddtune reads {VERSION}; "
            "record the trace again"
        )
    return TraceHeader.model_validate(data)


def header_differences(old: TraceHeader, new: TraceHeader) -> list[str]:
    """What differs between a folder's header and the one a command would write."""
    a, b = old.model_dump(), new.model_dump()
    return [f"{key}: {_short(a[key])} there, {_short(b[key])} now" for key in a if a[key] != b[key]]


def write_request(folder: Path, data: RequestData) -> None:
    """The request's file, whole or not at all."""
    from safetensors.numpy import save

    tensors = {"tokens": np.ascontiguousarray(data.tokens, dtype=np.int32)}
    for view, arrays in data.views.items():
        for name, array in arrays.items():
            tensors[f"{view}.{name}"] = np.ascontiguousarray(array)
    metadata = {
        "prompt_tokens": str(data.prompt_tokens),
        "finish": str(data.finish),
        "completion_tokens": str(data.completion_tokens),
        "greedy_mismatches": str(data.greedy_mismatches),
    }
    path = request_path(folder, data.request.key)
    with atomic_path(path) as tmp:
        tmp.write_bytes(save(tensors, metadata=metadata))


def read_request(folder: Path, request: TracedRequest) -> RequestData:
    from safetensors import safe_open

    path = request_path(folder, request.key)
    if not path.is_file():
        raise UserError(
            f"{folder}: request {request.key} is not traced yet; finish the recording "
            "(rerun the same `ddtune trace record`, it resumes)"
        )
    views: dict[str, dict[str, np.ndarray]] = {}
    with safe_open(str(path), framework="numpy") as handle:
        meta = handle.metadata() or {}
        tokens = handle.get_tensor("tokens")
        for name in handle.keys():  # noqa: SIM118 (a safe_open handle is no dict)
            if name != "tokens":
                view, field = name.rsplit(".", 1)
                views.setdefault(view, {})[field] = handle.get_tensor(name)
    return RequestData(
        request,
        tokens.astype(np.int64),
        int(meta["prompt_tokens"]),
        int(meta["finish"]),
        int(meta["completion_tokens"]),
        views,
        int(meta.get("greedy_mismatches", 0)),
    )


def traced_keys(folder: Path) -> set[str]:
    """Keys of the requests whose files exist."""
    return {p.stem for p in (Path(folder) / "requests").glob("r*.safetensors")}


def size_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


__all__ = [
    "CAPTURES",
    "ModelInfo",
    "RequestData",
    "TraceHeader",
    "TracedRequest",
    "header_differences",
    "read_header",
    "read_request",
    "request_path",
    "size_bytes",
    "text_sha256",
    "traced_keys",
    "view_name",
    "write_header",
    "write_request",
]
