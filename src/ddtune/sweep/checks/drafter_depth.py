"""The draft depth each config asks for, against the depth its drafter's block allows.

    check_depth(spec, store_path)     # one of `before_stop.CHECKS`: UserError, exit 2

A DFlash drafter proposes at most `block_size - 1` tokens a round (its block
holds the bonus token too); a config asking for more is refused before anything
is stopped. The depth a config asks for is read, in this order:

    the method's knob       `block_size` of method dflash (`ddtune.methods`; vLLM spells it
                            num_speculative_tokens = block_size - 1, SGLang
                            --speculative-num-draft-tokens = block_size)
    the rendered command    (a hand-written template, e.g. a var inside the flags)
                            vLLM: `--speculative-config` JSON of method dflash, its
                            num_speculative_tokens; SGLang DFLASH (its own command, or
                            ddtune's launcher with --mode dflash):
                            --speculative-num-draft-tokens

The drafter's block is its folder's `config.json` `block_size` (the drafter the
rendered command names: `services.models.served_models`). Where the block cannot
be read here (another machine's path, a hub id, no block in its config), nothing
is said: the engine's own parser and readiness judge the config.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ddtune.errors import UserError
from ddtune.fingerprint import config_of
from ddtune.services.models import flag_value, served_models
from ddtune.services.spec import ServiceSpec
from ddtune.sweep.spec.parse import Config, SweepSpec

SGLANG_DRAFT_TOKENS = "--speculative-num-draft-tokens"
VLLM_CONFIG = "--speculative-config"


@dataclass(frozen=True)
class Depth:
    """How a config sets the tokens its round verifies (the drafted ones + 1)."""

    name: str  # the setting: "block_size", "num_speculative_tokens", ...
    value: int
    drafted_offset: int  # drafted tokens = value - drafted_offset (block_size: 1; vLLM's: 0)
    where: str = ""  # where the setting is written, when not a key of its own

    @property
    def drafted(self) -> int:
        return self.value - self.drafted_offset

    def largest(self, block: int) -> int:
        """The largest value a drafter with this block allows (block - 1 drafted)."""
        return block - 1 + self.drafted_offset


def check_depth(spec: SweepSpec, store_path: Path) -> None:
    """Refuse a config whose round is deeper than its drafter's block (module doc)."""
    base = Path(spec.base_dir) if spec.base_dir else None
    blocks: dict[Path, int | None] = {}
    for config, _ in spec.all_configs():
        depth = config_depth(config, spec.service)
        if depth is None:
            continue
        drafter = served_models(spec.service, config.params, config.user_vars(), base).drafter
        if drafter is None:
            continue
        if drafter not in blocks:
            blocks[drafter] = drafter_block(drafter)
        block = blocks[drafter]
        if block is not None and depth.drafted > block - 1:
            where = f" ({depth.where})" if depth.where else ""
            raise UserError(
                f"{config.label()}: {depth.name} = {depth.value}{where} drafts {depth.drafted} "
                f"tokens a round, more than the drafter's block allows ({block} tokens: at most "
                f"{block - 1} drafted; {drafter / 'config.json'}); use {depth.name} <= "
                f"{depth.largest(block)}",
                key=depth.name,
            )


def drafter_block(drafter: Path) -> int | None:
    """The drafter folder's `config.json` `block_size` (None: unreadable, or none there)."""
    block = (config_of(drafter) or {}).get("block_size")
    return block if isinstance(block, int) and not isinstance(block, bool) and block > 1 else None


def config_depth(config: Config, service: ServiceSpec) -> Depth | None:
    """The tokens a round of `config` verifies, where it sets them (module doc); else None."""
    method = config.params.method_config()
    block_size = method.get("block_size") if method.name == "dflash" else None
    if isinstance(block_size, int):
        return Depth("block_size", block_size, 1)
    if not service.command:
        return None
    argv = service.render_argv(config.params, config.user_vars())
    if service.engine == "vllm":
        return _vllm_depth(argv)
    if service.engine == "sglang":
        return _sglang_depth(argv)
    return None


def _vllm_depth(argv: list[str]) -> Depth | None:
    try:
        spec = json.loads(flag_value(argv, (VLLM_CONFIG,)) or "null")
    except ValueError:
        return None
    if not isinstance(spec, dict) or spec.get("method") != "dflash":
        return None
    tokens = spec.get("num_speculative_tokens")
    if not isinstance(tokens, int) or isinstance(tokens, bool):
        return None
    return Depth("num_speculative_tokens", tokens, 0, VLLM_CONFIG)


def _sglang_depth(argv: list[str]) -> Depth | None:
    """SGLang DFLASH (its own flag, or ddtune's launcher's `--mode dflash`): draft tokens."""
    algorithm = flag_value(argv, ("--speculative-algorithm",)) or ""
    launcher = flag_value(argv, ("--mode",)) == "dflash"
    text = flag_value(argv, (SGLANG_DRAFT_TOKENS,))
    if not (algorithm.upper() == "DFLASH" or launcher) or text is None or not text.isdigit():
        return None
    return Depth(SGLANG_DRAFT_TOKENS, int(text), 1)


__all__ = ["Depth", "check_depth", "config_depth", "drafter_block"]
