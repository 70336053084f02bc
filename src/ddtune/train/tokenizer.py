"""Byte-level BPE tokenizer for the bundled models (Hugging Face `tokenizers`).

Special tokens: `<|endoftext|>` (EOS, also used as padding) and `<|mask|>` (the
DFlash drafter's mask token). Saved as `tokenizer.json` plus a
`tokenizer_config.json` naming the EOS, so our engine and `transformers` read
the same tokenizer.

See docs/ddtree.md "Train".
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from ddtune.errors import UserError

EOS_TOKEN = "<|endoftext|>"
MASK_TOKEN = "<|mask|>"
SPECIAL_TOKENS = [EOS_TOKEN, MASK_TOKEN]
MIN_VOCAB = 256 + len(SPECIAL_TOKENS) + 1


def train_tokenizer(texts: Iterable[str], vocab_size: int = 4096) -> Tokenizer:
    """Learn byte-level BPE merges from `texts`; every byte is in the base alphabet."""
    if vocab_size < MIN_VOCAB:
        raise UserError(
            f"vocab_size must be at least {MIN_VOCAB} (256 bytes + specials); got {vocab_size}"
        )
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def save_tokenizer(tokenizer: Tokenizer, folder: Path, max_length: int = 512) -> None:
    """Write `tokenizer.json` and a `tokenizer_config.json` that transformers understands."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": EOS_TOKEN,
        "pad_token": EOS_TOKEN,
        "mask_token": MASK_TOKEN,
        "model_max_length": max_length,
        "clean_up_tokenization_spaces": False,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def load_tokenizer(folder: Path) -> Tokenizer:
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        raise UserError(
            f"no tokenizer.json in {folder}; run `ddtune train tokenizer --out {folder}` first"
        )
    return Tokenizer.from_file(str(path))


def special_id(tokenizer: Tokenizer, token: str) -> int:
    """Id of a special token; a clear error if this tokenizer lacks it."""
    token_id = tokenizer.token_to_id(token)
    if token_id is None:
        raise UserError(
            f"the tokenizer has no {token} token; train it with `ddtune train tokenizer`"
        )
    return token_id
