"""`ddtune trace record`: the drafter's per-depth top-K at every position of the greedy path.

For each request (`TraceRequest`), in order:
  1. continuation  the target's T = 0 tokens after the prompt (its own greedy
                   decode, or a sweep's stored baseline output extended greedily),
                   EOS ignored up to max_tokens: the last round may draft past a stop;
                   checked against the teacher-forced argmaxes of step 3 (a token
                   where they part is counted: `greedy_mismatches`, a near-tie)
  2. finish        where the output ends under the request's stops
                   (`ddtree.stops.OutputBuilder`, the engine's own rule)
  3. features      one teacher-forced target forward over prompt + continuation,
                   the drafter's `target_layer_ids` captured as the predicted
                   engine feeds them (`capture`: post-norm = ddtune/HF/SGLang,
                   pre-norm = vLLM's last layer, `ddtree.models.capture`)
  4. views         per (window, query length): the drafter over every root
                   position at once (`drafter_rows`), then per depth the top-K
                   log-probs and ids, the greedy token's rank and log-prob
  5. write         the request's file, atomically (a killed recording resumes)

The target side is a `TargetSide`: ddtune's own engine (`OwnTarget`, the
bundled models or any ddtune folder) or a Hugging Face model through
`transformers` (`trace/hf.py`). See docs/traces.md "Traces".
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

from ddtune.ddtree.models.capture import residual_capture
from ddtune.ddtree.models.drafter import DFlashDrafter
from ddtune.ddtree.stops import OutputBuilder
from ddtune.errors import UserError
from ddtune.fingerprint import model_fingerprint
from ddtune.params import window_to_wire
from ddtune.server.identity import file_sha256, weights_sha256
from ddtune.trace.files import (
    ModelInfo,
    RequestData,
    TracedRequest,
    TraceHeader,
    header_differences,
    read_header,
    traced_keys,
    view_name,
    write_header,
    write_request,
)
from ddtune.trace.requests import TraceRequest, TraceSettings

if TYPE_CHECKING:
    from ddtune.ddtree.engine import Engine

ROWS_PER_CALL = 32  # root positions per drafter forward (its mask is rows*Q x (context + rows*Q))


class TargetSide(Protocol):
    """What recording needs of the target model, whatever runs it."""

    backend: str
    target_dir: Path
    drafter_dir: Path
    drafter: DFlashDrafter
    max_context: int
    eos_token_ids: list[int]
    num_layers: int
    dtype: str

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...

    def greedy(self, prompt: list[int], max_new: int) -> list[int]: ...

    def features(self, ids: list[int], capture: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(the drafter's features [1, T, L*H], the target's argmax after each position [T])."""
        ...

    def embed(self, ids: torch.Tensor) -> torch.Tensor: ...

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor: ...


class OwnTarget:
    """ddtune's engine: the same fused weights and kernels `ddtune serve` decodes with."""

    backend = "ddtune"

    def __init__(
        self,
        target_dir: Path,
        drafter_dir: Path,
        engine: Engine | None = None,
        dtype: str = "float32",
    ) -> None:
        """`engine`: one already loaded from these folders (tests trace float64 engines);
        else loaded in `dtype` (the one the spec's service computes in)."""
        from ddtune.ddtree.engine import Engine

        self.engine = engine or Engine.load(target_dir, drafter_dir, getattr(torch, dtype))
        assert self.engine.drafter is not None
        self.target_dir, self.drafter_dir = Path(target_dir), Path(drafter_dir)
        self.drafter = self.engine.drafter
        self.dtype = str(self.drafter.fc.weight.dtype).removeprefix("torch.")
        self.max_context = self.engine.max_context
        self.eos_token_ids = self.engine.eos_token_ids
        self.num_layers = self.engine.target.cfg.num_hidden_layers

    def encode(self, text: str) -> list[int]:
        return self.engine.tokenizer.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.engine.tokenizer.decode(ids)

    def greedy(self, prompt: list[int], max_new: int) -> list[int]:
        """The T = 0 tokens, decoded with DDTree: token for token AR's (the engine's lossless
        property test), 2-3x sooner; `trace_request` checks them against the teacher-forced
        argmaxes."""
        from ddtune.params import DecodeParams, SamplingParams

        sampling = SamplingParams(max_new_tokens=max_new, temperature=0.0, ignore_eos=True)
        return self.engine.generate(prompt, DecodeParams("ddtree", 8, 2, 64), sampling).token_ids

    def features(self, ids: list[int], capture: str) -> tuple[torch.Tensor, torch.Tensor]:
        target = self.engine.target
        guard = residual_capture(target) if capture == "pre-norm" else contextlib.nullcontext()
        with torch.inference_mode(), guard:
            out = target(torch.tensor([ids]), hidden_layer_ids=self.drafter.cfg.target_layer_ids)
        assert out.logits is not None
        return torch.cat(out.hidden, dim=-1), out.logits[0].argmax(dim=-1)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.engine.target.embed(ids)

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.engine.target.lm_logits(hidden)


# --- the recording ------------------------------------------------------------------


def build_header(
    side: TargetSide,
    requests: Sequence[TraceRequest],
    settings: TraceSettings,
    source: str,
    prompt_set_hash: str | None = None,
    known: TraceHeader | None = None,
) -> TraceHeader:
    """The header `requests` would be recorded under. `known`: the folder's header, whose
    weight sha256 is reused where the fingerprint is unchanged (a resume rehashes nothing)."""
    cfg = side.drafter.cfg
    block = cfg.block_size
    lengths = sorted({*settings.query_lengths, *((block,) if settings.block_too else ())})
    lengths = lengths or [block]
    check_settings(settings, block, lengths)
    return TraceHeader(
        target=model_info(side.target_dir, side.backend, known.target if known else None),
        drafter=model_info(side.drafter_dir, side.backend, known.drafter if known else None),
        tokenizer_sha256=tokenizer_sha256(side.target_dir),
        capture=settings.capture,
        backend=side.backend,
        dtype=side.dtype,
        block_size=block,
        target_layer_ids=tuple(cfg.target_layer_ids),
        max_context=side.max_context,
        windows=tuple(window_to_wire(w) for w in settings.windows),
        query_lengths=tuple(lengths),
        topk_max=settings.topk_max,
        requests=tuple(r.traced(f"r{i:04d}") for i, r in enumerate(requests)),
        source=source,
        prompt_set_hash=prompt_set_hash,
    )


def model_info(folder: Path, backend: str, known: ModelInfo | None) -> ModelInfo:
    """Where, the fingerprint (seconds whatever the size) and, for ddtune's own folders (small;
    what `ddtune serve` reports), the weights' full sha256."""
    fingerprint = model_fingerprint(folder).digest
    if known is not None and known.fingerprint == fingerprint:
        return ModelInfo(path=str(folder), sha256=known.sha256, fingerprint=fingerprint)
    sha = weights_sha256(folder) if backend == "ddtune" else None
    return ModelInfo(path=str(folder), sha256=sha, fingerprint=fingerprint)


def check_settings(settings: TraceSettings, block: int, lengths: Sequence[int]) -> None:
    if settings.topk_max < 1:
        raise UserError(f"--topk-max must be at least 1; got {settings.topk_max}")
    for q in lengths:
        if not 2 <= q <= block:
            raise UserError(
                f"query length {q} does not fit the drafter's block of {block}: use 2..{block} "
                f"(vLLM's DFlash with K draft tokens uses K + 1)"
            )
    if len(set(settings.windows)) != len(settings.windows):
        raise UserError("a --window is given twice")


def tokenizer_sha256(target_dir: Path) -> str:
    path = Path(target_dir) / "tokenizer.json"
    return file_sha256(path) if path.is_file() else hashlib.sha256(b"").hexdigest()


def record_trace(
    side: TargetSide,
    requests: Sequence[TraceRequest],
    out: Path,
    settings: TraceSettings,
    source: str = "engine",
    prompt_set_hash: str | None = None,
    on_request: Callable[[int, int], None] | None = None,  # (done, total) after each request
) -> TraceHeader:
    """Record (or resume) the trace of `requests` into `out`; returns its header."""
    known = read_header(out) if (out / "trace.json").is_file() else None
    header = build_header(side, requests, settings, source, prompt_set_hash, known)
    if known is not None:
        differences = header_differences(known, header)
        if differences:
            raise UserError(
                f"{out} holds a trace recorded with other settings ({'; '.join(differences)}); "
                "record into a new --out folder, or add --fresh to replace it"
            )
    write_header(out, header)
    done = traced_keys(out)
    for i, (request, traced) in enumerate(zip(requests, header.requests, strict=True)):
        if traced.key not in done:
            write_request(out, trace_request(side, request, traced, header))
        if on_request is not None:
            on_request(i + 1, len(requests))
    return header


def trace_request(
    side: TargetSide, request: TraceRequest, traced: TracedRequest, header: TraceHeader
) -> RequestData:
    """Steps 1-4 for one request."""
    prompt = side.encode(request.prompt)
    if not prompt:
        raise UserError(f"request {traced.key} ({request.workload}): the prompt is empty")
    if len(prompt) >= side.max_context:
        raise UserError(
            f"request {traced.key}: the prompt has {len(prompt)} tokens; the context holds "
            f"{side.max_context}"
        )
    generated = continuation(side, prompt, request)
    finish, completion = finish_point(side, request, generated)
    tokens = prompt + generated
    feats, argmax = side.features(tokens[:-1], header.capture)  # the last root's context at most
    mismatches = int((argmax[len(prompt) - 1 :].cpu() != torch.tensor(tokens[len(prompt) :])).sum())
    views = {}
    for window in header.window_values():
        for q in header.query_lengths:
            views[view_name(window, q)] = trace_view(
                side, feats, tokens, len(prompt), window, q, header.topk_max
            )
    return RequestData(traced, np.array(tokens), len(prompt), finish, completion, views, mismatches)


def continuation(side: TargetSide, prompt: list[int], request: TraceRequest) -> list[int]:
    """The T = 0 tokens after the prompt (EOS ignored), up to max_tokens and a block more:
    a round may draft past a stop, and vLLM drafts its K tokens past max_tokens.

    With the service's token ids (`--from-service`): those, decoded further only where
    they stop short. With a stored output (a served engine's own greedy text): the engine's greedy tokens
    when their text begins with it (the two paths agree; re-encoding a text need not give
    the tokens that produced it), else the stored text's tokens, continued greedily."""
    room = side.max_context - len(prompt) + 1  # the root at the last position runs too
    want = min(request.max_tokens + side.drafter.cfg.block_size - 1, room)
    if request.continuation_ids is not None:  # the service's own tokens: no local decode
        given = list(request.continuation_ids[:want])
        more = want - len(given)
        return given + (side.greedy(prompt + given, more)[:more] if more > 0 else [])
    own = side.greedy(prompt, want)
    if request.continuation is None or side.decode(own).startswith(request.continuation):
        return own
    stored = side.encode(request.continuation)[:want]
    if len(stored) >= want:
        return stored
    return stored + side.greedy(prompt + stored, want - len(stored))[: want - len(stored)]


def finish_point(side: TargetSide, request: TraceRequest, generated: list[int]) -> tuple[int, int]:
    """(tokens emitted when the output ends, usage.completion_tokens) under the engine's rules."""
    stops = [] if request.ignore_eos else side.eos_token_ids
    out = OutputBuilder(side.decode, request.max_tokens, stops, request.stop)
    for fed, token in enumerate(generated, start=1):
        out.add([token])
        if out.finish_reason is not None:
            return fed, len(out.ids) + (1 if out.stop_token is not None else 0)
    return len(generated), len(out.ids)  # the context filled up first


def trace_view(
    side: TargetSide,
    feats: torch.Tensor,  # [1, T - 1, L*H] features of tokens[:-1]
    tokens: list[int],
    prompt_len: int,
    window: int | None,
    query_length: int,
    k: int,
) -> dict[str, np.ndarray]:
    """The drafter's top-K per (root position, depth) for one window and query length."""
    n = len(tokens) - prompt_len  # root positions prompt_len .. len(tokens) - 1
    depth = query_length - 1
    top_lp = np.zeros((n, depth, k), np.float32)
    top_ids = np.zeros((n, depth, k), np.int32)
    rank = np.full((n, depth), -1, np.int32)
    target_lp = np.full((n, depth), math.nan, np.float32)
    ids = torch.tensor(tokens)
    for start in range(0, n, ROWS_PER_CALL):
        rows = torch.arange(start, min(n, start + ROWS_PER_CALL)) + prompt_len
        with torch.inference_mode():
            hidden = drafter_rows(side, feats, ids, rows, window, query_length)
            logprobs = torch.log_softmax(side.lm_logits(hidden[:, 1:]).float(), dim=-1)
            values, top = logprobs.topk(min(k, logprobs.shape[-1]), dim=-1)  # [R, D, K]
        sl = slice(start, start + len(rows))
        top_lp[sl, :, : values.shape[-1]] = values.cpu().numpy()
        top_ids[sl, :, : top.shape[-1]] = top.cpu().numpy()
        _target_ranks(logprobs, ids, rows, rank[sl], target_lp[sl])
    return {"top_lp": top_lp, "top_ids": top_ids, "target_rank": rank, "target_lp": target_lp}


def drafter_rows(
    side: TargetSide,
    feats: torch.Tensor,  # [1, C, L*H]
    ids: torch.Tensor,  # [T] prompt + continuation
    rows: torch.Tensor,  # [R] root positions p
    window: int | None,
    query_length: int,
) -> torch.Tensor:
    """Drafter hidden states [R, Q, H]: row r drafts the block [ids[p], MASK x (Q-1)] at
    positions p..p+Q-1 over the context positions [p - W, p) (all before p without a window),
    as the engine's round does with its cache; every row in one forward, kept apart by a mask."""
    drafter = side.drafter
    device = feats.device
    r, q = len(rows), query_length
    context = int(rows.max())  # context positions 0..context-1
    block = torch.full((r, q), drafter.cfg.mask_token_id, device=device)
    block[:, 0] = ids[rows].to(device)
    q_pos = (rows[:, None] + torch.arange(q)).reshape(1, r * q).to(device)
    c_pos = torch.arange(context, device=device)[None]
    j = torch.arange(context)[None]
    low = torch.zeros_like(rows) if window is None else (rows - window).clamp(min=0)
    sees = (j >= low[:, None]) & (j < rows[:, None])  # [R, C]
    own = torch.block_diag(*[torch.ones(q, q, dtype=torch.bool)] * r)  # [R*Q, R*Q]
    mask = torch.cat([sees.repeat_interleave(q, dim=0), own], dim=1)[None].to(device)
    hidden = drafter(
        side.embed(block.reshape(1, r * q)), feats[:, :context], q_pos, c_pos, attn_mask=mask
    )
    return hidden.reshape(r, q, -1)


def _target_ranks(
    logprobs: torch.Tensor,  # [R, D, V]
    ids: torch.Tensor,
    rows: torch.Tensor,
    rank: np.ndarray,  # [R, D] out
    target_lp: np.ndarray,  # [R, D] out
) -> None:
    """Where the greedy token tokens[p + d] ranks in the drafter's depth-d distribution."""
    depth = logprobs.shape[1]
    where = rows[:, None] + torch.arange(1, depth + 1)[None]  # [R, D] positions p + d
    known = where < len(ids)
    wanted = ids[where.clamp(max=len(ids) - 1)].to(logprobs.device)
    lp = logprobs.gather(-1, wanted[..., None])[..., 0]  # [R, D]
    above = (logprobs > lp[..., None]).sum(-1)
    rank[:] = np.where(known.numpy(), above.cpu().numpy(), -1)
    target_lp[:] = np.where(known.numpy(), lp.cpu().numpy(), np.nan)


__all__ = [
    "OwnTarget",
    "TargetSide",
    "TraceRequest",
    "TraceSettings",
    "build_header",
    "drafter_rows",
    "record_trace",
    "trace_request",
]
