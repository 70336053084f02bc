"""The tokenizer of a model folder (`tokenizer.json`, Hugging Face `tokenizers` format).

See docs/ddtree.md "Engine".
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer as _HFTokenizer

from ddtune.errors import UserError


class Tokenizer:
    """encode(text) -> ids and decode(ids) -> text; special tokens are kept in the text."""

    def __init__(self, inner: _HFTokenizer) -> None:
        self.inner = inner

    @classmethod
    def load(cls, folder: str | Path) -> Tokenizer:
        path = Path(folder) / "tokenizer.json"
        if not path.is_file():
            raise UserError(f"{path} is missing; the target model folder needs its tokenizer")
        try:
            return cls(_HFTokenizer.from_file(str(path)))
        except Exception as exc:  # tokenizers raises a bare Exception on bad files
            raise UserError(f"{path} is not a valid tokenizer.json: {exc}") from None

    @property
    def vocab_size(self) -> int:
        return self.inner.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.inner.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        return self.inner.token_to_id(token)
