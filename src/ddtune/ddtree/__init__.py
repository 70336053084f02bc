"""The DDTree engine: own Qwen3/Llama decoders, the DFlash drafter, tree drafting and exact verification.

Reading order: `models/` (the networks: HF config, layers, target decoder,
DFlash drafter, HF folders, tokenizer), `cache` (the KV cache of both),
`testing` (random tiny checkpoints), then decoding: `tree`, `sampling`,
`choice` (one request's token choice: sampler, min_tokens ban, logprobs),
`logprobs`, `stops`, `walk` (follow the target's choices down the verified
tree), `decoding` (one request's rounds), `engine` (`Engine`); `batch/`
(continuous batching: step token budget, slotted KV cache, packing, batched
rounds, the scheduler); `bench/` (`ddtune bench-engine`). The command
line is `ddtune.cli.generate` (`ddtune generate`).

`from ddtune.ddtree import Engine` works; torch is imported only on first use
so that `ddtune --help` stays fast. Contracts: docs/ddtree.md "Engine".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddtune.lazy import lazy_names

if TYPE_CHECKING:
    from ddtune.ddtree.engine import Engine, GenerationResult, GenerationStats

__getattr__ = lazy_names(
    __name__, {name: "engine" for name in ("Engine", "GenerationResult", "GenerationStats")}
)

__all__ = ["Engine", "GenerationResult", "GenerationStats"]
