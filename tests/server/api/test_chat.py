"""Chat templates: the tokenizer folder's jinja template, or the plain fallback."""

from __future__ import annotations

import json
from pathlib import Path

from ddtune.server.api.chat import ChatTemplate

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


def test_fallback_without_template(tmp_path: Path) -> None:
    chat = ChatTemplate.from_model_dir(tmp_path)
    assert chat.kind == "fallback"
    assert chat.render(MESSAGES) == "system: be brief\nuser: hi\nassistant:"


def test_template_from_tokenizer_config(tmp_path: Path) -> None:
    template = (
        "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    config = {"chat_template": template, "bos_token": {"content": "<s>"}}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    chat = ChatTemplate.from_model_dir(tmp_path)
    assert chat.kind == "jinja"
    assert chat.render(MESSAGES) == "<s><system>be brief<user>hi<assistant>"
