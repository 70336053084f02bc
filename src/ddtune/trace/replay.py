"""The exact round-by-round replay of DDTree and DFlash over a trace (torch-free).

At T = 0 every lossless config commits the target's greedy path. A round
whose root sits at position p (the `emitted`-th token, emitted - 1 = its row
in the trace) drafts from the drafter's per-depth top-K recorded there, so:

  1. depth   the engine's cap: min(block - 1, tokens still allowed - 1, cache room),
             and for ddtree at most the budget (`decoding.Session.step`)
  2. tree    `ddtree.tree.build_tree` (ddtree: the same heap, per-depth cap and
             tie-breaking) or `chain_tree` (dflash: the top-1 chain)
  3. walk    `ddtree.tree.accepted_nodes`: step into the child holding the next
             greedy token while one exists; the round commits the accepted nodes
             and the bonus token
  4. stop    when the emitted tokens reach the output's end (`finish`), or the
             context is full, as `ddtree.engine._run` stops

`Rules.vllm` drafts `query length - 1` tokens every round instead (vLLM's
DFlash proposes K tokens whatever remains; its counters take the last round
whole: `engines.vllm.round_counts`). See docs/traces.md "Traces".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ddtune.ddtree.tree import DraftTree, accepted_nodes, build_tree, chain_tree
from ddtune.engines import RoundTrace
from ddtune.params import DecodeParams
from ddtune.trace.files import RequestData


@dataclass(frozen=True)
class Rules:
    """How the predicted engine caps a round's draft."""

    block_size: int  # the drafter's block (the engine's capacity rule adds it)
    query_length: int  # drafter queries per round: the bonus + the draft depth
    max_context: int
    vllm: bool = False  # depth query_length - 1 every round, no cap by what remains


def replay_request(data: RequestData, view: str, params: DecodeParams, rules: Rules) -> RoundTrace:
    """One request's verify rounds under `params` (tokens per round, bonus included)."""
    prompt, generated = data.prompt_tokens, data.generated
    arrays = data.views.get(view, {})  # none for ar
    max_tokens = data.request.max_tokens
    capacity = min(rules.max_context, prompt + max_tokens + params.budget + rules.block_size)
    lengths: list[int] = []
    emitted = 1  # the prefill's token
    while emitted < data.finish:
        pos = prompt + emitted - 1  # the root's position = tokens in the cache
        if pos >= capacity and not rules.vllm:
            break
        depth = _depth(params, rules, max_tokens - emitted, capacity - pos - 1)
        tree = _tree(params, arrays, emitted - 1, depth, capacity - pos - 1)
        accepted = accepted_nodes(tree, generated[emitted : emitted + depth].tolist())
        lengths.append(accepted + 1)
        emitted += accepted + 1
    return RoundTrace(tuple(lengths), data.completion_tokens, max_tokens)


def _depth(params: DecodeParams, rules: Rules, remaining: int, room: int) -> int:
    if params.mode == "ar":
        return 0
    if rules.vllm:
        return rules.query_length - 1
    depth = min(rules.query_length - 1, remaining - 1, room)
    return min(depth, params.budget) if params.mode == "ddtree" else depth


def _tree(
    params: DecodeParams, arrays: dict[str, np.ndarray], row: int, depth: int, room: int
) -> DraftTree:
    """The round's draft tree from the trace's rows at one root position ([D, K] each)."""
    if depth <= 0:
        return DraftTree.empty()
    top_lp, top_ids = arrays["top_lp"][row], arrays["top_ids"][row]
    if params.mode == "dflash":
        return chain_tree(top_ids[:depth, :1].tolist(), top_lp[:depth, :1].tolist())
    k = min(params.topk, top_lp.shape[1])
    return build_tree(
        top_lp[:depth, :k].tolist(), top_ids[:depth, :k].tolist(), min(params.budget, room), k
    )


__all__ = ["Rules", "replay_request"]
