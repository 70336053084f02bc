"""Every `--help` page defines the terms it uses at their first use (issue 44, item 8).

READY, restart-bound, τ (acceptance length) and T = 0 are ddtune's words; a page that says
one of them (or its old spelling: tau, T=0) says what it means where it first does, in the
words of `ddtune.cli.words`."""

from __future__ import annotations

import argparse
import re

import pytest

from ddtune.cli import build_parser
from ddtune.cli.words import TERMS

SPELLINGS = {  # how a page may write each term, and the definition its first use carries
    "READY": (re.compile(r"\bREADY\b"), TERMS["READY"]),
    "T = 0": (re.compile(r"\bT ?= ?0\b"), TERMS["T = 0"]),
    "τ": (re.compile(r"τ|\btau\b"), TERMS["τ"]),
    "restart-bound": (re.compile(r"restart-bound"), TERMS["restart-bound"]),
}


def pages() -> list[tuple[str, str]]:
    """(command, its --help text, wrapped lines joined) for every command and subcommand."""
    found = []

    def walk(parser: argparse.ArgumentParser) -> None:
        found.append((parser.prog, " ".join(parser.format_help().split())))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)

    walk(build_parser())
    return found


PAGES = pages()


@pytest.mark.parametrize(("prog", "text"), PAGES, ids=[p for p, _ in PAGES])
def test_a_page_defines_each_term_where_it_first_uses_it(prog, text):
    for term, (spelling, definition) in SPELLINGS.items():
        first = spelling.search(text)
        if first is None:
            continue
        said = " ".join(definition.split())
        assert text[first.start() :].startswith(said), (
            f"{prog} --help uses {term} first as {text[first.start() : first.start() + 60]!r}, "
            f"without its definition {said!r}"
        )


def test_the_pages_use_the_terms():
    used = {
        term for term, (spelling, _) in SPELLINGS.items() for _, t in PAGES if spelling.search(t)
    }
    assert {"READY", "T = 0", "τ"} <= used  # the check above has pages to check
