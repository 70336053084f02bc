"""The report as a neutral document: sections of paragraphs, lists, tables and images.

`report/sections.py` decides *what* the report says (`build_document`);
`markdown.py` and `html.py` only decide how it looks, so both outputs carry
the same content. See docs/report.md "How the report is built".
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Link:
    text: str
    href: str


Cell = str | Link


@dataclass
class Paragraph:
    text: str
    warning: bool = False


@dataclass
class Bullets:
    items: list[str]
    warning: bool = False


@dataclass
class Table:
    headers: list[str]
    rows: list[list[Cell]]


@dataclass
class Image:
    file: str  # name inside the output directory
    title: str
    caption: str


@dataclass
class Lead:
    """The answer: one emphasised line per item, each with its status in words."""

    items: list[LeadItem]


@dataclass
class LeadItem:
    title: str  # what the line answers: "Throughput"
    main: str  # the answer itself: "Run ddtree b16 k4 w64"
    detail: str  # its figures: "268 tok/s, 1.88x AR [1.71, 2.06]; within 5% of ..."
    status: str  # in words: "decided", "a tie within 5%", "not decided yet: ..."
    tone: str = "open"  # how sure, for the look: "decided" | "tie" | "open"


@dataclass
class Code:
    """A command (or a log tail) to show verbatim, with a line saying what it is."""

    text: str
    caption: str = ""


Block = Paragraph | Bullets | Table | Image | Lead | Code


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    sections: list[Section]
