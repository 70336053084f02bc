"""The per-step token budget of batched decoding (no torch: the server checks it at startup).

A request's round verifies its tree plus the root: `budget + 1` tokens for
ddtree, `block_size` for dflash (root + the block's chain), 1 for ar. A
batch admits requests while their round tokens fit `max_step_tokens`, so a
budget below one request's round could never run anything: `check_round_fits`
says so. See docs/ddtree.md "Engine".
"""

from __future__ import annotations

from ddtune.errors import UserError
from ddtune.params import DecodeParams

DEFAULT_MAX_BATCH = 8  # requests decoded together
DEFAULT_MAX_STEP_TOKENS = 2048  # round tokens of all running requests + prefill, per step


def check_round_fits(params: DecodeParams, block_size: int, max_step_tokens: int) -> None:
    """`UserError` (key `max_step_tokens`) when one request's round exceeds the step budget."""
    need = params.verify_tokens(block_size)
    if need > max_step_tokens:
        raise UserError(
            f"max_step_tokens {max_step_tokens} is smaller than one request's round of "
            f"{need} tokens ({params.label()}: tree + root); raise max_step_tokens or lower "
            "the budget",
            key="max_step_tokens",
        )
