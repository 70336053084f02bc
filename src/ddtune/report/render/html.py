"""Render a report `Document` as one self-contained HTML page.

Plots are embedded as base64 PNG data URIs and the style sheet is inline, so
the page opens in a browser with no network and no other files (log-tail links
point at files next to the sweep and are the only outside references).
See docs/report.md "How the report is built".
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from html import escape
from pathlib import Path

import ddtune.report.render.document as doc

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
section.answer { background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 8px; padding: .2em 1.2em .6em; }
section.answer h2 { border: 0; margin-top: .6em; }
.lead { margin: .35em 0; font-size: 1.02em; color: #424a53; }
.lead:first-of-type { font-size: 1.35em; line-height: 1.3; color: #1b1f24; margin-bottom: .6em; }
.lead .objective { display: inline-block; min-width: 8.5em; color: #57606a; font-size: .8em;
                   text-transform: uppercase; letter-spacing: .04em; }
.lead:first-of-type .objective { display: block; }
.lead .status { white-space: nowrap; font-weight: 600; padding: 0 .45em; border-radius: 4px; }
.tone-decided .status { color: #0a5c2a; background: #dff3e4; }
.tone-tie .status { color: #0b4a8b; background: #e1ecfb; }
.tone-open .status { color: #7a4b00; background: #fff1d6; }
.code-caption { margin: .8em 0 .2em; font-size: 13px; color: #57606a; }
pre { background: #1b1f24; color: #f0f3f6; padding: .6em .9em; border-radius: 6px; overflow-x: auto;
      font-size: 13px; white-space: pre-wrap; word-break: break-all; }
"""


def render_html(document: doc.Document, out_dir: Path) -> str:
    """The page; images are read from `out_dir` and embedded."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(document.title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{escape(document.title)}</h1>",
        render_sections(document.sections, embedded(out_dir)),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


ImageSource = Callable[[str], str]  # an image's file name -> its `src`


def embedded(out_dir: Path) -> ImageSource:
    """Images read from `out_dir` into data URIs (a page that needs no other file)."""

    def source(file: str) -> str:
        data = base64.b64encode((out_dir / file).read_bytes()).decode("ascii")
        return f"data:image/png;base64,{data}"

    return source


def render_sections(sections: list[doc.Section], image_src: ImageSource) -> str:
    """The sections alone (a page's body part), each with an id from its title
    ("Race so far" -> `race-so-far`); `Answer` gets its own box."""
    parts = []
    for section in sections:
        css = ' class="answer"' if section.title.startswith("Answer") else ""
        slug = re.sub(r"[^a-z0-9]+", "-", section.title.lower()).strip("-")
        parts.append(f'<section id="{slug}"{css}><h2>{escape(section.title)}</h2>')
        parts += [_block(block, image_src) for block in section.blocks]
        parts.append("</section>")
    return "\n".join(parts)


def _block(block: doc.Block, image_src: ImageSource) -> str:
    if isinstance(block, doc.Paragraph):
        css = ' class="warning"' if block.warning else ""
        return f"<p{css}>{escape(block.text)}</p>"
    if isinstance(block, doc.Bullets):
        css = ' class="warning"' if block.warning else ""
        return f"<ul{css}>" + "".join(f"<li>{escape(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, doc.Table):
        head = "".join(f"<th>{escape(h)}</th>" for h in block.headers)
        body = "".join(
            "<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>" for row in block.rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if isinstance(block, doc.Lead):
        return "".join(_lead(item) for item in block.items)
    if isinstance(block, doc.Code):
        caption = f'<p class="code-caption">{escape(block.caption)}</p>' if block.caption else ""
        return f"{caption}<pre><code>{escape(block.text)}</code></pre>"
    if isinstance(block, doc.Image):
        src = escape(image_src(block.file), quote=True)
        return (
            f'<figure><img alt="{escape(block.title)}" src="{src}">'
            f"<figcaption><b>{escape(block.title)}.</b> {escape(block.caption)}</figcaption></figure>"
        )
    raise TypeError(f"unknown block {type(block).__name__}")


def _lead(item: doc.LeadItem) -> str:
    detail = f": {escape(item.detail)}" if item.detail else ""
    return (
        f'<p class="lead tone-{escape(item.tone)}"><span class="objective">{escape(item.title)}'
        f"</span> <b>{escape(item.main)}</b>{detail} "
        f'<span class="status">{escape(item.status)}</span></p>'
    )


def _cell(cell: doc.Cell) -> str:
    if isinstance(cell, doc.Link):
        return f'<a href="{escape(cell.href, quote=True)}">{escape(cell.text)}</a>'
    return escape(cell)
