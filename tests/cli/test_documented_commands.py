"""Every `ddtune ...` command the README and docs/*.md show is one the CLI takes (issue 44).

A command line in a code block (fenced, or indented four spaces; `sudo` and a `$`
prompt allowed, a trailing `\\` continued, a shell pipe, `&`, `&&` or `# comment` cut)
is parsed whole by the CLI's own argparse parser (`ddtune.cli.build_parser`): a
renamed flag, a dropped required argument or a wrong choice fails here. An inline
`ddtune ...` in prose or a table, and a code line with optional parts, is a synopsis
(`[--store S]`, `a \\| b`): its command path must exist and every `--option` it names
must be one that command has.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from ddtune.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
INLINE = re.compile(r"`((?:sudo )?ddtune [^`]+)`")
SHELL_STOPS = ("|", "||", "&&", ";", "&", ">", ">>", "2>&1")


@dataclass(frozen=True)
class Shown:
    """One command as a doc shows it."""

    where: str  # "docs/x.md:12"
    text: str
    in_code: bool


def shown_commands(path: Path) -> list[Shown]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Shown] = []
    fenced = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            fenced = not fenced
        elif fenced or line.startswith("    "):
            text = line.strip().removeprefix("$ ").strip()
            start = i
            while text.endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text[:-1] + " " + lines[i].strip()
            if text.startswith(("ddtune ", "sudo ddtune ")):
                found.append(Shown(f"{_name(path)}:{start + 1}", text, True))
        else:
            found += [
                Shown(f"{_name(path)}:{i + 1}", m.group(1), False) for m in INLINE.finditer(line)
            ]
        i += 1
    return found


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def words_of(text: str) -> list[str]:
    """The argv after `ddtune`: shell syntax and comments cut."""
    words = shlex.split(text, comments=True)
    for stop in SHELL_STOPS:
        if stop in words:
            words = words[: words.index(stop)]
    if words and words[0] == "sudo":
        words = words[1:]
    return words[1:]


def parse_error(words: list[str]) -> str | None:
    """argparse's own message for `words`, or None when it parses."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(words)
    except SystemExit as exc:
        if exc.code:
            return err.getvalue().strip().splitlines()[-1]
    return None


def command_parser(words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The deepest subcommand parser `words` name, and the words after its name."""
    parser, rest = build_parser(), list(words)
    while rest:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or rest[0] not in subs[0].choices:
            break
        parser, rest = subs[0].choices[rest[0]], rest[1:]
    return parser, rest


def unknown_options(text: str) -> list[str]:
    """The `--options` of a synopsis that its command does not have."""
    words = words_of(text.replace("\\|", " "))
    parser, rest = command_parser(words)
    known = {opt for action in parser._actions for opt in action.option_strings}
    options = [w.split("=", 1)[0].strip("[]") for w in rest if w.lstrip("[").startswith("--")]
    return [opt for opt in options if opt != "--" and opt not in known]


def synopsis(shown: Shown) -> bool:
    """A form with optional parts or alternatives (`[--x X]`, `a \\| b`): not one command."""
    return not shown.in_code or "[" in shown.text or "\\|" in shown.text


ALL = [shown for path in DOCS for shown in shown_commands(path)]
CODE = [s for s in ALL if not synopsis(s)]
INLINE_SHOWN = [s for s in ALL if synopsis(s)]


def test_the_docs_show_commands_in_code_and_in_prose():
    assert len(CODE) > 15 and len(INLINE_SHOWN) > 50  # the extractor saw the docs


@pytest.mark.parametrize("shown", CODE, ids=lambda s: s.where)
def test_every_command_line_in_a_code_block_parses(shown):
    error = parse_error(words_of(shown.text))
    assert error is None, f"{shown.where}: `{shown.text}`: {error}"


@pytest.mark.parametrize("shown", INLINE_SHOWN, ids=lambda s: s.where)
def test_every_command_named_in_prose_exists_with_its_options(shown):
    words = words_of(shown.text.replace("\\|", " "))
    parser, _ = command_parser(words)
    assert parser.prog.split()[1:] == [w for w in words[: len(parser.prog.split()) - 1]], (
        f"{shown.where}: `{shown.text}` names no ddtune command"
    )
    assert unknown_options(shown.text) == [], f"{shown.where}: `{shown.text}`"


def test_a_renamed_flag_would_be_caught():
    assert parse_error(words_of("ddtune sweep report --outdir x")) is not None
    assert unknown_options("ddtune sweep plan SPEC [--no-such-flag]") == ["--no-such-flag"]
    assert words_of("sudo ddtune sweep plan x.toml | head  # a comment") == [
        "sweep",
        "plan",
        "x.toml",
    ]
