"""The tokenizer round-trips text and is readable by our engine and by transformers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddtune.ddtree.models.tokenizer import Tokenizer
from ddtune.errors import UserError
from ddtune.train.tokenizer import EOS_TOKEN, MASK_TOKEN, load_tokenizer, train_tokenizer

SAMPLES = [
    "def f(xs: list[int]) -> int:\n    return sum(x * x for x in xs)\n",
    "\tTabs, trailing spaces   \n\n\nand blank lines",
    "unicode: naïve café — λx: x → 🐍 ✓",
    "",
    "<|endoftext|> inside text",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_round_trip(tiny_tokenizer_dir: Path, text: str) -> None:
    tok = Tokenizer.load(tiny_tokenizer_dir)
    assert tok.decode(tok.encode(text)) == text


def test_special_tokens_are_single_ids(tiny_tokenizer_dir: Path) -> None:
    tok = load_tokenizer(tiny_tokenizer_dir)
    eos, mask = tok.token_to_id(EOS_TOKEN), tok.token_to_id(MASK_TOKEN)
    assert {eos, mask} == {0, 1}
    assert tok.encode("a" + EOS_TOKEN).ids[-1] == eos
    assert tok.get_vocab_size() == 400


def test_merges_compress_code(tiny_tokenizer_dir: Path) -> None:
    tok = load_tokenizer(tiny_tokenizer_dir)
    text = SAMPLES[0] * 4
    assert len(tok.encode(text).ids) < len(text.encode()) / 2


def test_transformers_reads_the_same_ids(tiny_tokenizer_dir: Path) -> None:
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir))
    ours = Tokenizer.load(tiny_tokenizer_dir)
    assert hf.eos_token == EOS_TOKEN and hf.eos_token_id == 0
    for text in SAMPLES[:3]:
        assert hf(text, add_special_tokens=False).input_ids == ours.encode(text)
    config = json.loads((tiny_tokenizer_dir / "tokenizer_config.json").read_text())
    assert config["eos_token"] == EOS_TOKEN and config["mask_token"] == MASK_TOKEN


def test_bad_inputs_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="vocab_size must be at least"):
        train_tokenizer(["abc"], vocab_size=100)
    with pytest.raises(UserError, match="no tokenizer.json"):
        load_tokenizer(tmp_path)
