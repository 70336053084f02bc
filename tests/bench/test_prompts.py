"""Prompts are deterministic in the seed, sized in characters, hashed; user JSONL replaces them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddtune.bench.prompts import build_prompt_set, read_prompts_file
from ddtune.errors import UserError


def test_same_seed_same_prompts_and_hash() -> None:
    a = build_prompt_set(0, (4, 100), (2, 320), 3.0)
    b = build_prompt_set(0, (4, 100), (2, 320), 3.0)
    assert a == b and a.hash() == b.hash()
    assert len(a.short) == 4 and len(a.long) == 2
    assert a.source.startswith("stdlib:")


def test_other_seed_or_size_changes_the_hash() -> None:
    base = build_prompt_set(0, (4, 100), (2, 320), 3.0).hash()
    assert build_prompt_set(1, (4, 100), (2, 320), 3.0).hash() != base
    assert build_prompt_set(0, (4, 120), (2, 320), 3.0).hash() != base


def test_prompt_lengths_follow_the_character_budget() -> None:
    prompts = build_prompt_set(5, (6, 100), (3, 320), 3.0)
    for text in prompts.short:
        assert 240 <= len(text) <= 300
    for text in prompts.long:
        assert 768 <= len(text) <= 960
    assert len(set(prompts.short)) > 1


def test_user_prompts_file(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    rows = [
        {"prompt": "a"},
        {"prompt": "b", "workload": "long"},
        {"prompt": "c", "workload": "short"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    prompts = build_prompt_set(0, (4, 100), (2, 320), 3.0, str(path))
    assert prompts.short == ["a", "c"] and prompts.long == ["b"] and prompts.source == str(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"text": "a"}', r"p.jsonl:1: expected"),
        ('{"prompt": "a", "workload": "medium"}', r"workload must be 'short' or 'long'"),
        ("[1, 2", r"not valid JSON"),
    ],
)
def test_bad_prompts_file(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(UserError, match=message):
        read_prompts_file(path)


def test_number_tables_are_not_prompts() -> None:
    from ddtune.bench.prompts import looks_like_code

    assert looks_like_code("def f(x):\n    return x + 1\n")
    assert not looks_like_code("    0xfdd0, 0xfdd1, 0xfdd2, 0xfdd3,\n    0xfdd4, 0xfdd5,\n")
    for text in build_prompt_set(0, (8, 100), (4, 320), 3.0).short:
        assert looks_like_code(text)
