"""Where generation ends: max_new_tokens, stop/EOS tokens, stop strings; what may stream.

Rules (the engine applies them to every token a round commits, in order):

- A stop token (EOS unless `ignore_eos`, or one of `stop_token_ids`) ends the
  output with finish "stop"; the stop token itself is not part of the output.
- A stop string ends the output with finish "stop"; `text` is cut right before
  it, and `token_ids` keep only the tokens that end at or before that point.
- Never more than `max_new_tokens` tokens (finish "length").
- Before `min_tokens` tokens, stop strings are not looked for (the decoder
  never chooses a stop token then; `Session` bans them).
- Streaming releases a token once no stop string can still start inside it,
  so the streamed ids always equal a prefix of the final `token_ids`.

See docs/ddtree.md "Engine".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


class OutputBuilder:
    def __init__(
        self,
        decode: Callable[[list[int]], str],
        max_new_tokens: int,
        stop_token_ids: Sequence[int] = (),
        stop_strings: Sequence[str] = (),
        min_tokens: int = 0,
    ) -> None:
        self.decode = decode
        self.max_new_tokens = max_new_tokens
        self.min_tokens = min_tokens
        self.stop_ids = set(stop_token_ids)
        self.stop_token: int | None = None  # the stop token that ended the output
        self.stop_strings = [s for s in stop_strings if s]
        self.hold = max((len(s) for s in self.stop_strings), default=1) - 1
        self.ids: list[int] = []
        self.ends: list[int] = []  # ends[i] = len(decode(ids[: i + 1])), with stop strings only
        self.text: str | None = None  # set when a stop string cut the text
        self.released = 0
        self.finish_reason: str | None = None

    @property
    def remaining(self) -> int:
        return self.max_new_tokens - len(self.ids)

    def add(self, tokens: Sequence[int]) -> list[int]:
        """Take a round's tokens in order; returns the ids newly safe to stream."""
        for token in tokens:
            if self.finish_reason is not None:
                break
            self._add_one(int(token))
        return self._release()

    def final_text(self) -> str:
        return self.text if self.text is not None else self.decode(self.ids)

    def _add_one(self, token: int) -> None:
        if token in self.stop_ids:
            self.finish_reason, self.stop_token = "stop", token
            return
        self.ids.append(token)
        if self.stop_strings:
            text = self.decode(self.ids)
            self.ends.append(len(text))
            if len(self.ids) >= self.min_tokens:
                self._check_stop_strings(text)
        if self.finish_reason is None and self.remaining <= 0:
            self.finish_reason = "length"

    def _check_stop_strings(self, text: str) -> None:
        before = self.ends[-2] if len(self.ends) > 1 else 0
        start = max(0, before - self.hold)
        hits = [i for i in (text.find(s, start) for s in self.stop_strings) if i >= 0]
        if not hits:
            return
        cut = min(hits)
        keep = sum(1 for end in self.ends if end <= cut)
        self.ids, self.ends = self.ids[:keep], self.ends[:keep]
        self.text = text[:cut]
        self.finish_reason = "stop"

    def _release(self) -> list[int]:
        if self.finish_reason is not None or not self.stop_strings:
            safe = len(self.ids)
        else:
            limit = self.ends[-1] - self.hold if self.ends else 0
            safe = sum(1 for end in self.ends if end <= limit)
        new = self.ids[self.released : safe]
        self.released = max(self.released, safe)
        return new
