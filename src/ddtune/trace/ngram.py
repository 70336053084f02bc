"""Prompt-lookup (vLLM's `ngram`) acceptance, exactly, from the greedy path alone.

    rule = NgramRule(min_n=2, max_n=4, k=5, max_model_len=4096)
    counts = replay_ngram(tokens, prompt_len, finish=48, max_tokens=48, rule=rule)
    counts.tau                       # 1 + accepted / drafts, as vLLM's counters give it

Prompt lookup needs no drafter: each step it looks for the context's last n
tokens earlier in the context and proposes the K tokens that followed. At
T = 0 the committed tokens are the target's greedy path whatever it proposes,
so every (min, max, K) setting's rounds follow from that path:

  1. propose   vLLM's rule (`vllm/v1/spec_decode/ngram_proposer.py`): the longest
               n in [min_n, max_n] whose last-n suffix occurs earlier in prompt +
               committed tokens; among occurrences of that length, the earliest
               one; the K tokens after it, fewer where the context ends first or
               the model's length would be passed; none when nothing matches
  2. verify    the draft's longest prefix equal to the greedy path is accepted;
               the step commits it and the target's own next token
  3. count     a step that proposed tokens adds one draft and its accepted tokens
               to vLLM's counters (`vllm:spec_decode_num_drafts`, `..._accepted_tokens`);
               a step without a proposal adds nothing
  4. stop      once max_tokens are committed (the last step counts whole, as the
               counters take it before the output is cut), or the output's end

Torch-free; `ddtune trace predict --mode ngram` prints it for a trace folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.trace.requests import TraceRequest
from ddtune.trace.round_cost import Shape


@dataclass(frozen=True)
class NgramRule:
    """vLLM's `prompt_lookup_min`, `prompt_lookup_max`, `num_speculative_tokens`, and the
    model's length (`max_model_len`: no draft past it)."""

    min_n: int
    max_n: int
    k: int
    max_model_len: int

    def __post_init__(self) -> None:
        if not 1 <= self.min_n <= self.max_n:
            raise UserError(
                f"n-gram lengths need 1 <= --min <= --max; got --min {self.min_n} "
                f"--max {self.max_n}"
            )
        if self.k < 1:
            raise UserError(f"--k (tokens proposed a step) must be at least 1; got {self.k}")

    def label(self) -> str:
        return f"ngram n={self.min_n}..{self.max_n} k={self.k}"


@dataclass(frozen=True)
class NgramCounts:
    """What vLLM's counters add for some requests, and the steps they took."""

    accepted: int = 0
    drafts: int = 0
    drafted_tokens: int = 0
    steps: int = 0
    tokens: int = 0  # committed after the prefill's first token

    def __add__(self, other: NgramCounts) -> NgramCounts:
        return NgramCounts(
            self.accepted + other.accepted,
            self.drafts + other.drafts,
            self.drafted_tokens + other.drafted_tokens,
            self.steps + other.steps,
            self.tokens + other.tokens,
        )

    def times(self, count: int) -> NgramCounts:
        return NgramCounts(*(count * v for v in self._values()))

    def _values(self) -> tuple[int, int, int, int, int]:
        return self.accepted, self.drafts, self.drafted_tokens, self.steps, self.tokens

    @property
    def tau(self) -> float | None:
        """1 + accepted / drafts: vLLM's acceptance length (None: nothing was ever proposed)."""
        return 1.0 + self.accepted / self.drafts if self.drafts else None

    @property
    def tokens_per_step(self) -> float:
        """Tokens committed per target forward, every step counted (with or without a draft)."""
        return self.tokens / self.steps if self.steps else 0.0


def propose(context: np.ndarray, rule: NgramRule) -> np.ndarray:
    """vLLM's prompt-lookup proposal for `context` (prompt + committed tokens)."""
    total = len(context)
    k = min(rule.k, rule.max_model_len - total)
    if total < rule.min_n or k <= 0:
        return context[:0]
    for n in range(min(rule.max_n, total - 1), rule.min_n - 1, -1):
        start = _earliest_occurrence(context, n)
        if start is not None:
            begin = start + n
            return context[begin : begin + min(k, total - begin)]
    return context[:0]


def _earliest_occurrence(context: np.ndarray, n: int) -> int | None:
    """The first i < len - n with context[i:i+n] equal to the last n tokens (None: none)."""
    total = len(context)
    suffix = context[total - n :]
    windows = np.lib.stride_tricks.sliding_window_view(context[: total - 1], n)
    hits = np.flatnonzero((windows == suffix).all(axis=1))
    return int(hits[0]) if len(hits) else None


def replay_ngram(
    tokens: np.ndarray, prompt_len: int, finish: int, max_tokens: int, rule: NgramRule
) -> NgramCounts:
    """One request's steps under `rule`: `tokens` = prompt + the greedy continuation (at least
    `finish` long, longer where a last draft may reach past the end); `finish` = tokens the
    output holds when it ends (max_tokens unless a stop came first)."""
    generated = tokens[prompt_len:]
    emitted = 1  # the prefill's token
    accepted = drafts = drafted = steps = 0
    while emitted < min(finish, max_tokens):
        draft = propose(tokens[: prompt_len + emitted], rule)
        known = generated[emitted : emitted + len(draft)]
        take = _common_prefix(draft[: len(known)], known)
        if len(draft):
            accepted, drafts, drafted = accepted + take, drafts + 1, drafted + len(draft)
        steps += 1
        emitted += take + 1
    return NgramCounts(accepted, drafts, drafted, steps, min(emitted, max_tokens) - 1)


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    differ = np.flatnonzero(a != b)
    return int(differ[0]) if len(differ) else len(a)


@dataclass(frozen=True)
class GreedyPath:
    """One request's greedy path as recorded: prompt + continuation ids, and how often the
    bench sends it."""

    tokens: np.ndarray
    prompt_len: int
    finish: int
    max_tokens: int
    count: int = 1
    workload: str = "prompt"


def predict_ngram(paths: Iterable[GreedyPath], rule: NgramRule) -> dict[str, NgramCounts]:
    """Counts per workload and pooled ("all")."""
    out: dict[str, NgramCounts] = {"all": NgramCounts()}
    for path in paths:
        counts = replay_ngram(
            path.tokens, path.prompt_len, path.finish, path.max_tokens, rule
        ).times(path.count)
        out["all"] = out["all"] + counts
        out[path.workload] = out.get(path.workload, NgramCounts()) + counts
    return out


def paths_of_trace(data: Sequence[object]) -> list[GreedyPath]:
    """A trace's requests (`trace.files.RequestData`) as greedy paths."""
    from ddtune.trace.files import RequestData

    paths = []
    for item in data:
        assert isinstance(item, RequestData)
        paths.append(
            GreedyPath(
                np.asarray(item.tokens),
                item.prompt_tokens,
                item.finish,
                item.request.max_tokens,
                item.request.count,
                item.request.workload,
            )
        )
    return paths


__all__ = [
    "GreedyPath",
    "ngram_lines",
    "ngram_rule",
    "ngram_shapes",
    "paths_of_bench",
    "paths_of_texts",
    "trace_paths",
    "NgramCounts",
    "NgramRule",
    "paths_of_trace",
    "predict_ngram",
    "propose",
    "replay_ngram",
]


def trace_paths(folder: Path) -> tuple[list[GreedyPath], int]:
    """A trace folder's greedy paths and its context length."""
    from ddtune.trace.predict import Trace

    trace = Trace.read(folder)
    return paths_of_trace(trace.data), trace.header.max_context


def paths_of_texts(tokenizer_file: Path, requests: Sequence[TraceRequest]) -> list[GreedyPath]:
    """Greedy paths from texts (a sweep's stored T = 0 outputs: `TraceRequest.continuation`),
    tokenized with the target's tokenizer.json. The output is re-encoded: where that gives
    other tokens than the engine produced, a match may differ (the trace's own path is exact)."""
    if not Path(tokenizer_file).is_file():
        raise UserError(
            f"{tokenizer_file}: no tokenizer here to read the stored outputs with; pass "
            "--tokenizer FILE (the target's tokenizer.json)"
        )
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    paths = []
    for r in requests:
        prompt = tokenizer.encode(r.prompt, add_special_tokens=False).ids
        output = tokenizer.encode(r.continuation or "", add_special_tokens=False).ids
        tokens = np.array(prompt + output)
        paths.append(
            GreedyPath(tokens, len(prompt), len(output), r.max_tokens, r.count, r.workload)
        )
    return paths


def paths_of_bench(token_paths: Sequence[Mapping[str, Any]]) -> list[GreedyPath]:
    """A bench's recorded token paths (`[bench] token_paths`: each request's prompt and T = 0
    answer ids) as greedy paths: the ids the engine itself read and wrote, so exact."""
    return [
        GreedyPath(
            np.asarray([*p["prompt_ids"], *p["output_ids"]]),
            len(p["prompt_ids"]),
            len(p["output_ids"]),
            int(p["max_tokens"]),
            int(p.get("count") or 1),
            str(p["workload"]),
        )
        for p in token_paths
    ]


def ngram_rule(params: DecodeParams, max_model_len: int) -> NgramRule | None:
    """vLLM's rule for an n-gram config (its defaults where a knob is not set: both lookup
    lengths 5, or one the other's); None for another method, or without its K."""
    if params.method != "ngram":
        return None
    knobs = dict(params.method_knobs)
    k = knobs.get("num_draft_tokens")
    low, high = knobs.get("prompt_lookup_min"), knobs.get("prompt_lookup_max")
    if not isinstance(k, int):
        return None
    low, high = (low or high or 5), (high or low or 5)
    assert isinstance(low, int) and isinstance(high, int)
    return NgramRule(low, high, k, max_model_len)


def ngram_shapes(counts: Mapping[str, NgramCounts]) -> dict[str, Shape]:
    """Per workload: the rounds of `predict_ngram`'s counts. A round is a step (one with
    no proposal verifies its one token); `acceptance` is τ as vLLM's counters give it."""
    return {
        workload: Shape(
            "ngram",
            c.tokens_per_step,
            1.0 + c.drafted_tokens / c.steps,
            0.0,
            c.tau or 1.0,
        )
        for workload, c in counts.items()
        if workload != "all" and c.steps
    }


def ngram_lines(paths: Sequence[GreedyPath], rule: NgramRule, as_json: bool) -> list[str]:
    """What `ddtune trace predict --mode ngram` prints."""
    counts = predict_ngram(paths, rule)
    if as_json:
        body = {
            "mode": "ngram",
            "prompt_lookup_min": rule.min_n,
            "prompt_lookup_max": rule.max_n,
            "num_speculative_tokens": rule.k,
            **{name: _counts_json(c) for name, c in counts.items()},
        }
        return [json.dumps(body)]
    lines = [f"{rule.label()}: {_counts_text(counts['all'])}"]
    lines += [f"  {name}: {_counts_text(c)}" for name, c in counts.items() if name != "all"]
    return lines


def _counts_text(counts: NgramCounts) -> str:
    tau = "none (nothing proposed)" if counts.tau is None else f"{counts.tau:.3f}"
    share = counts.drafts / counts.steps if counts.steps else 0.0
    return (
        f"tau {tau} as vLLM counts it ({counts.drafts} drafts, {counts.accepted} accepted); "
        f"{counts.tokens_per_step:.2f} tokens a step, a proposal in {share:.0%} of steps"
    )


def _counts_json(counts: NgramCounts) -> dict[str, object]:
    return {
        "tau": counts.tau,
        "accepted": counts.accepted,
        "drafts": counts.drafts,
        "drafted_tokens": counts.drafted_tokens,
        "steps": counts.steps,
        "tokens_per_step": counts.tokens_per_step,
    }
