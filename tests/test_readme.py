"""The README keeps its promises: its specs parse, its set-up commands and doc links are real."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ddtune.sweep.plan import parse_spec

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
TOML_BLOCK = re.compile(r"^```toml\n(.*?)^```", re.MULTILINE | re.DOTALL)
DOC_PATH = re.compile(r"\bdocs/[\w./-]+?\.md\b")


def toml_blocks() -> list[str]:
    return TOML_BLOCK.findall(README)


def test_the_readme_shows_a_spec():
    assert toml_blocks(), "README.md has no ```toml block"


@pytest.mark.parametrize("index", range(len(toml_blocks())))
def test_every_toml_block_is_a_spec_that_parses(index):
    spec = parse_spec(toml_blocks()[index], source="README.md", base_dir=REPO)
    assert spec.configs, "the spec names no configuration to try"


def test_the_readme_shows_the_two_set_up_commands():
    assert "make demo" in README
    assert "make test" in README


def test_every_docs_page_the_readme_names_exists():
    named = set(DOC_PATH.findall(README))
    assert named, "README.md names no docs/*.md page"
    missing = sorted(path for path in named if not (REPO / path).is_file())
    assert missing == []
