"""`ddtune trace predict`: every config's acceptance, round by round, from one trace.

    trace = Trace.read(folder)
    prediction = trace.predict(DecodeParams("ddtree", 16, 4, 64))
    prediction.mean_acceptance_length()          # as `ddtune generate --json` counts it
    prediction.acceptance(get_engine("vllm"))      # as that engine's acceptance source reports it
    prediction.rounds_per_request("short")

What a trace cannot answer is a one-line `UserError`, never a guess
(`Trace.view_for`): a window it did not record, a topk above its K, a draft
deeper than its views hold. Identical requests count as often as the bench
sends them. A DFlash config that sets its `block_size` drafts with that many
queries a round (`queries_of`; vLLM's K + 1), so its view is that query length's.
See docs/traces.md "Traces".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddtune.engines import RoundTrace, ServerEngine
from ddtune.errors import UserError
from ddtune.methods import drafted_tokens
from ddtune.params import DecodeParams, window_to_wire
from ddtune.trace.files import RequestData, TraceHeader, read_header, read_request, view_name
from ddtune.trace.replay import Rules, replay_request
from ddtune.trace.round_cost import Shape


@dataclass(frozen=True)
class Prediction:
    """One config's predicted rounds, request by request (in the trace's order)."""

    params: DecodeParams
    requests: tuple[tuple[str, int, RoundTrace], ...]  # (workload, count, rounds)

    def _rounds(self, workload: str | None) -> list[RoundTrace]:
        return [
            rounds
            for name, count, rounds in self.requests
            for _ in range(count)
            if workload is None or name == workload
        ]

    def mean_acceptance_length(self, workload: str | None = None) -> float:
        """Tokens per verify round, bonus included, pooled over rounds (`GenerationStats`)."""
        rounds = self._rounds(workload)
        total = sum(len(r.lengths) for r in rounds)
        return sum(sum(r.lengths) for r in rounds) / total if total else 0.0

    def acceptance(self, engine: ServerEngine, workload: str | None = None) -> float | None:
        """The figure `engine`'s acceptance source would report for these rounds."""
        return engine.trace_acceptance(self._rounds(workload))

    def rounds_per_request(self, workload: str | None = None) -> float:
        rounds = self._rounds(workload)
        return sum(len(r.lengths) for r in rounds) / len(rounds) if rounds else 0.0

    def workloads(self) -> list[str]:
        return list(dict.fromkeys(name for name, _, _ in self.requests))

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.params.to_wire(),
            "label": self.params.label(),
            "mean_acceptance_length": self.mean_acceptance_length(),
            "prompts": [
                {"workload": name, "count": count, "acceptance_lengths": list(r.lengths)}
                for name, count, r in self.requests
            ],
        }


def queries_of(params: DecodeParams) -> int | None:
    """The drafter queries one round of `params` runs where the config sets them: a DFlash
    config's `block_size` (the bonus token and block_size - 1 drafts: vLLM's
    num_speculative_tokens + 1); None where it takes the drafter's own block."""
    drafts = drafted_tokens(params.method_config()) if params.mode == "dflash" else None
    return None if drafts is None else drafts + 1


class Trace:
    """A recorded trace folder, read once; `predict` replays any config over it."""

    def __init__(self, folder: Path, header: TraceHeader, data: Sequence[RequestData]) -> None:
        self.folder, self.header, self.data = folder, header, list(data)

    @classmethod
    def read(cls, folder: str | Path) -> Trace:
        folder = Path(folder)
        header = read_header(folder)
        return cls(folder, header, [read_request(folder, r) for r in header.requests])

    def queries(self, params: DecodeParams, query_length: int | None = None) -> int:
        """The drafter queries a round of `params` runs: `query_length` where given, else the
        config's own (`queries_of`), else the traced drafter's block."""
        return query_length or queries_of(params) or self.header.block_size

    def view_for(self, params: DecodeParams, query_length: int | None = None) -> str:
        """The view that holds what `params` drafts, or a UserError saying what is missing."""
        h = self.header
        q = self.queries(params, query_length)
        if params.mode != "ar" and params.window not in h.window_values():
            raise UserError(
                f"{self.folder}: window {window_to_wire(params.window)} is not in the trace "
                f"(it holds {', '.join(str(w) for w in h.windows)}); record it with "
                f"--window {window_to_wire(params.window)}"
            )
        if params.mode == "ddtree" and params.topk > h.topk_max:
            raise UserError(
                f"{self.folder}: topk {params.topk} is above the trace's K = {h.topk_max}; "
                f"record it with --topk-max {params.topk} (or more)"
            )
        if q > h.block_size:
            raise UserError(
                f"a draft of {q - 1} tokens needs {q} drafter queries, but the drafter's block "
                f"holds {h.block_size}: at most {h.block_size - 1} draft tokens a round"
            )
        if q not in h.query_lengths:
            raise UserError(
                f"{self.folder}: no view with query length {q} (the trace holds "
                f"{', '.join(map(str, h.query_lengths))}); record it with --query-length {q}"
            )
        return view_name(params.window, q)

    def predict(
        self,
        params: DecodeParams,
        engine: ServerEngine | None = None,
        query_length: int | None = None,
    ) -> Prediction:
        """The config's rounds on every traced request, under `engine`'s drafting rule."""
        view = self.view_for(params, query_length) if params.mode != "ar" else ""
        rules = Rules(
            block_size=self.header.block_size,
            query_length=self.queries(params, query_length),
            max_context=self.header.max_context,
            vllm=engine is not None and engine.drafts_every_round,
        )
        return Prediction(
            params,
            tuple(
                (d.request.workload, d.request.count, replay_request(d, view, params, rules))
                for d in self.data
            ),
        )

    def shapes(
        self,
        params: DecodeParams,
        engine: ServerEngine | None = None,
        query_length: int | None = None,
    ) -> dict[str, Shape]:
        """Per workload, what the cost model needs of the config's rounds (`costs.Shape`)."""
        prediction = self.predict(params, engine, query_length)
        q = self.queries(params, query_length)
        out = {}
        for workload in prediction.workloads():
            rows = [
                (d, r)
                for d, (name, count, r) in zip(self.data, prediction.requests, strict=True)
                for _ in range(count)
                if name == workload and r.lengths
            ]
            if not rows:
                continue
            per_round = [(r.completion_tokens - 1) / len(r.lengths) for _, r in rows]
            contexts = [d.prompt_tokens + r.completion_tokens / 2 for d, r in rows]
            share = [_drafter_share(params, context) for context in contexts]
            out[workload] = Shape(
                mode=params.mode,
                tokens_per_round=sum(per_round) / len(per_round),
                verify_tokens=params.verify_tokens(q),
                drafter_share=sum(share) / len(share),
                acceptance=prediction.acceptance(engine, workload) if engine is not None else None,
                drafter_positions=sum(s * c for s, c in zip(share, contexts, strict=True))
                / len(contexts),
            )
        return out


def _drafter_share(params: DecodeParams, context: float) -> float:
    """The share of a context of `context` positions the drafter attends to (0 for ar)."""
    if params.mode == "ar":
        return 0.0
    return 1.0 if params.window is None else min(params.window, context) / context


__all__ = ["Prediction", "Trace", "queries_of"]
