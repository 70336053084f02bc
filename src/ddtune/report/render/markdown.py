"""Render a report `Document` as Markdown (GitHub-flavoured tables, images by file name).

See docs/report.md "How the report is built".
"""

from __future__ import annotations

import ddtune.report.render.document as doc


def render_markdown(document: doc.Document) -> str:
    lines = [f"# {document.title}", ""]
    for section in document.sections:
        lines += [f"## {section.title}", ""]
        for block in section.blocks:
            lines += _block(block) + [""]
    return "\n".join(lines).rstrip() + "\n"


def _block(block: doc.Block) -> list[str]:
    if isinstance(block, doc.Paragraph):
        return [f"> **{_escape(block.text)}**" if block.warning else _escape(block.text)]
    if isinstance(block, doc.Bullets):
        mark = "- **" if block.warning else "- "
        end = "**" if block.warning else ""
        return [f"{mark}{_escape(item)}{end}" for item in block.items]
    if isinstance(block, doc.Table):
        lines = ["| " + " | ".join(_escape(h) for h in block.headers) + " |"]
        lines.append("|" + "---|" * len(block.headers))
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in block.rows]
        return lines
    if isinstance(block, doc.Lead):
        return [
            f"- {_escape(item.title)}: **{_escape(item.main)}**"
            + (f": {_escape(item.detail)}" if item.detail else "")
            + f" — *{_escape(item.status)}*"
            for item in block.items
        ]
    if isinstance(block, doc.Code):
        caption = [_escape(block.caption), ""] if block.caption else []
        return [*caption, "```sh", block.text, "```"]
    if isinstance(block, doc.Image):
        return [
            f"### {_escape(block.title)}",
            "",
            f"![{_escape(block.title)}]({block.file})",
            "",
            f"*{_escape(block.caption)}*",
        ]
    raise TypeError(f"unknown block {type(block).__name__}")


def _cell(cell: doc.Cell) -> str:
    if isinstance(cell, doc.Link):
        return f"[{_escape(cell.text)}]({cell.href.replace(' ', '%20')})"
    return _escape(cell).replace("\n", " ")


def _escape(text: str) -> str:
    """Keep table pipes and emphasis markers literal."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*").replace("_", "\\_")
