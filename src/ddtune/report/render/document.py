"""The report as a neutral document: sections of paragraphs, lists, tables and images.

`report/sections.py` decides *what* the report says (`build_document`);
`markdown.py` and `html.py` only decide how it looks, so both outputs carry
the same content. See docs/architecture.md "Report".
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


Block = Paragraph | Bullets | Table | Image


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    sections: list[Section]
