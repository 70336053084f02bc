"""Turn chat messages into one prompt string.

The template comes from the target's tokenizer folder: `chat_template` in
`tokenizer_config.json` (or a `chat_template.jinja` file), rendered with a
sandboxed jinja2 environment when jinja2 is installed. Without a template (or
without jinja2) a plain fallback is used:

    system: You are terse.
    user: Hi
    assistant:

See docs/server.md "Server".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ddtune.errors import UserError


class ChatTemplate:
    """Renders `[{role, content}, ...]` + a generation prompt to text."""

    def __init__(self, source: str | None, special_tokens: dict[str, str] | None = None) -> None:
        self.source = source
        self.special_tokens = special_tokens or {}
        self._template = _compile(source) if source else None

    @property
    def kind(self) -> str:
        return "jinja" if self._template is not None else "fallback"

    @classmethod
    def from_model_dir(cls, model_dir: Path) -> ChatTemplate:
        config = _read_json(model_dir / "tokenizer_config.json")
        source = config.get("chat_template")
        if isinstance(source, list):  # HF allows [{name, template}, ...]
            named = {item.get("name"): item.get("template") for item in source}
            source = named.get("default") or next(iter(named.values()), None)
        jinja_file = model_dir / "chat_template.jinja"
        if source is None and jinja_file.is_file():
            source = jinja_file.read_text()
        specials = {key: _token_text(config.get(key)) for key in ("bos_token", "eos_token")}
        return cls(source, {k: v for k, v in specials.items() if v is not None})

    def render(
        self, messages: list[dict[str, str]], variables: Mapping[str, Any] | None = None
    ) -> str:
        """`variables` (a request's `chat_template_kwargs`) reach the jinja template; they
        cannot replace `messages`, `add_generation_prompt` or the special tokens."""
        if self._template is None:
            lines = [f"{m['role']}: {m['content']}" for m in messages]
            return "\n".join([*lines, "assistant:"])
        fixed = {"messages": messages, "add_generation_prompt": True, **self.special_tokens}
        return self._template.render({**(variables or {}), **fixed})


def _compile(source: str) -> Any:
    try:
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:  # jinja2 is optional: fall back to the plain template
        return None
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise_template_error
    try:
        return env.from_string(source)
    except Exception as exc:  # a broken template is the model folder's fault
        raise UserError(f"the tokenizer's chat_template does not compile: {exc}") from None


def _raise_template_error(message: str) -> None:
    raise ValueError(f"chat template: {message}")


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not valid JSON: {exc}") from None
    return data if isinstance(data, dict) else {}


def _token_text(value: Any) -> str | None:
    if isinstance(value, dict):  # AddedToken form: {"content": "<s>", ...}
        value = value.get("content")
    return value if isinstance(value, str) else None
