"""The DDTree engine: own Qwen3/Llama decoders, the DFlash drafter, tree drafting and exact verification.

Modules, in reading order: `config` (HF config.json), `layers`, `model` (target
decoder), `drafter` (DFlash), `cache` (the KV cache of both), `loading` (HF folders),
`tokenizer`, `testing` (random tiny checkpoints), then decoding: `tree`,
`sampling`, `choice` (one request's token choice: sampler, min_tokens ban,
logprobs), `logprobs`, `stops`, `decoding` (one request's rounds), `engine` (`Engine`);
batching: `budget` (step token budget), `slots` (slotted KV cache), `packing`
(padded verify/draft inputs and masks), `batch` (batched rounds), `walk`
(the batched walk), `scheduler`
(continuous batching); `speed` and `loadspeed` (in-process speed for
`ddtune bench-engine`, single-stream and `--concurrency`), `commands` and
`loadbench` (CLI).

`from ddtune.engine import Engine` works; torch is imported only on first use
so that `ddtune --help` stays fast. Contracts: docs/architecture.md "Engine".
"""

from __future__ import annotations

from typing import Any

_LAZY = {"Engine", "GenerationResult", "GenerationStats"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from ddtune.engine import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'ddtune.engine' has no attribute {name!r}")


__all__ = sorted(_LAZY)
