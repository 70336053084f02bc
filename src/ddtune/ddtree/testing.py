"""Random tiny checkpoints for tests and demos before trained models exist.

`write_random_checkpoint(folder)` writes a target (Qwen3 or Llama family) with
its tokenizer and generation config, plus a matching DFlash drafter, as
ordinary Hugging Face folders:

    target_dir, drafter_dir = write_random_checkpoint(tmp_path, family="qwen3", seed=0)

The weights are random, so the text is gibberish, but every code path
(loading, drafting, tree verification) runs exactly as with trained models.

See docs/ddtree.md "Engine".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models

from ddtune.ddtree.logprobs import TokenLogprob
from ddtune.ddtree.models.config import DrafterConfig, ModelConfig
from ddtune.ddtree.models.drafter import DFlashDrafter
from ddtune.ddtree.models.loading import save_decoder, save_drafter
from ddtune.ddtree.models.model import Decoder

SPECIAL_TOKENS = ["<|endoftext|>", "<|mask|>"]  # ids 0 (EOS) and 1 (drafter MASK)
ALPHABET = (
    " etaoinshrdlucmfwypvbgkqjxz\n"
    + "ETAOINSHRDLUCMFWYPVBGKQJXZ0123456789"
    + "()[]{}:=+-*/.,_'\"#<>!?%&|\t;@^`~$\\"
)


# Llama 3 RoPE scaling with a short original context, so tests reach the scaled band
LLAMA3_SCALING = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}


def char_tokenizer(vocab_size: int) -> Tokenizer:
    """A character-level tokenizer: 2 special tokens then `vocab_size - 2` characters."""
    if not 3 <= vocab_size <= len(ALPHABET) + 2:
        raise ValueError(f"vocab_size must be in 3..{len(ALPHABET) + 2}")
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in ALPHABET[: vocab_size - 2]:
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(SPECIAL_TOKENS)
    return tok


def random_configs(
    family: str = "qwen3",
    vocab_size: int = 128,
    hidden_size: int = 64,
    num_layers: int = 3,
    drafter_layers: int = 1,
    block_size: int = 4,
    max_position_embeddings: int = 512,
    tie_word_embeddings: bool = False,
    rope_scaling: dict | None = None,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int = 16,
    intermediate_size: int | None = None,
) -> tuple[ModelConfig, DrafterConfig]:
    """Small configs (defaults: 4 query heads, 2 key/value heads, head_dim 16)."""
    common: dict[str, Any] = dict(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 2 * hidden_size,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=head_dim,
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        max_position_embeddings=max_position_embeddings,
    )
    target = ModelConfig(
        family=family,
        num_hidden_layers=num_layers,
        tie_word_embeddings=tie_word_embeddings,
        rope_scaling=rope_scaling,
        bos_token_id=None,
        eos_token_id=0,
        **common,
    )
    layer_ids = sorted({0, num_layers // 2, max(0, num_layers - 2)})
    drafter = DrafterConfig(
        family="qwen3",
        num_hidden_layers=drafter_layers,
        block_size=block_size,
        target_layer_ids=layer_ids,
        mask_token_id=1,
        num_target_layers=num_layers,
        **common,
    )
    return target, drafter


def randomize(module: torch.nn.Module, generator: torch.Generator, std: float) -> None:
    """Normal(0, std) matrices, norm weights near 1, biases small: a non-trivial random model."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=generator))
            elif p.dim() == 1:
                p.copy_(0.02 * torch.randn(p.shape, generator=generator))
            else:
                p.copy_(std * torch.randn(p.shape, generator=generator))


def write_random_checkpoint(
    folder: str | Path,
    family: str = "qwen3",
    seed: int = 0,
    std: float = 0.15,
    **config_overrides: Any,
) -> tuple[Path, Path]:
    """Write `folder/target` and `folder/drafter`; returns both paths.

    `config_overrides` go to `random_configs` (vocab_size, hidden_size,
    num_layers, drafter_layers, block_size, max_position_embeddings,
    tie_word_embeddings, rope_scaling, num_heads, num_kv_heads, head_dim,
    intermediate_size).
    """
    folder = Path(folder)
    target_cfg, drafter_cfg = random_configs(family=family, **config_overrides)
    gen = torch.Generator().manual_seed(seed)
    target, drafter = Decoder(target_cfg), DFlashDrafter(drafter_cfg)
    randomize(target, gen, std)
    randomize(drafter, gen, std)
    target_dir, drafter_dir = folder / "target", folder / "drafter"
    target_dir.mkdir(parents=True, exist_ok=True)
    tok = char_tokenizer(min(target_cfg.vocab_size, len(ALPHABET) + 2))
    tok.save(str(target_dir / "tokenizer.json"))
    save_decoder(target, target_cfg, target_dir)
    save_drafter(drafter, drafter_cfg, drafter_dir)
    return target_dir, drafter_dir


def logprobs_close(a: list[TokenLogprob], b: list[TokenLogprob], tol: float = 1e-9) -> bool:
    """Same tokens and top ids; logprob values equal up to `tol` (float64 summation order)."""
    if [x.token for x in a] != [y.token for y in b]:
        return False
    for x, y in zip(a, b, strict=True):
        if abs(x.logprob - y.logprob) > tol or [t for t, _ in x.top] != [t for t, _ in y.top]:
            return False
        if any(abs(p - q) > tol for (_, p), (_, q) in zip(x.top, y.top, strict=True)):
            return False
    return True
