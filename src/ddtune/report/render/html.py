"""Render a report `Document` as one self-contained HTML page.

Plots are embedded as base64 PNG data URIs and the style sheet is inline, so
the page opens in a browser with no network and no other files (log-tail links
point at files next to the sweep and are the only outside references).
See docs/architecture.md "Report".
"""

from __future__ import annotations

import base64
from html import escape
from pathlib import Path

from ddtune.report.render.document import (
    Block,
    Bullets,
    Cell,
    Document,
    Image,
    Link,
    Paragraph,
    Table,
)

STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #1b1f24; background: #ffffff; line-height: 1.45; }
h1 { border-bottom: 2px solid #d0d7de; padding-bottom: .3em; }
h2 { margin-top: 1.8em; border-bottom: 1px solid #d0d7de; }
table { border-collapse: collapse; font-size: 13px; margin: .6em 0; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f5f7; }
tr:nth-child(even) td { background: #fafbfc; }
.warning { background: #fff4e5; border-left: 4px solid #d9822b; padding: .4em .8em; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #d0d7de; }
figcaption { font-size: 13px; color: #57606a; }
"""


def render_html(document: Document, out_dir: Path) -> str:
    """The page; images are read from `out_dir` and embedded."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(document.title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{escape(document.title)}</h1>",
    ]
    for section in document.sections:
        parts.append(f"<section><h2>{escape(section.title)}</h2>")
        parts += [_block(block, out_dir) for block in section.blocks]
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _block(block: Block, out_dir: Path) -> str:
    if isinstance(block, Paragraph):
        css = ' class="warning"' if block.warning else ""
        return f"<p{css}>{escape(block.text)}</p>"
    if isinstance(block, Bullets):
        css = ' class="warning"' if block.warning else ""
        return f"<ul{css}>" + "".join(f"<li>{escape(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Table):
        head = "".join(f"<th>{escape(h)}</th>" for h in block.headers)
        body = "".join(
            "<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>" for row in block.rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if isinstance(block, Image):
        data = base64.b64encode((out_dir / block.file).read_bytes()).decode("ascii")
        return (
            f'<figure><img alt="{escape(block.title)}" src="data:image/png;base64,{data}">'
            f"<figcaption><b>{escape(block.title)}.</b> {escape(block.caption)}</figcaption></figure>"
        )
    raise TypeError(f"unknown block {type(block).__name__}")


def _cell(cell: Cell) -> str:
    if isinstance(cell, Link):
        return f'<a href="{escape(cell.href, quote=True)}">{escape(cell.text)}</a>'
    return escape(cell)
