"""How the report looks: one neutral document, two tiny renderers, and the plots.

`document` (sections of paragraphs, lists, tables and images), `markdown`
and `html` (render that one document), `plots` (PNG, matplotlib's Agg
canvas, no pyplot state), `verdict_plots` (the forest plot of every config
against the leader and a race's timeline), `atomic` (every file written to a
temporary name and renamed, so a reader never sees half a report). What the
report says is `report/sections.py`; the machine-readable files are
`report/tables.py`.
"""

from ddtune.report.render.document import Document, Section
from ddtune.report.render.html import render_html
from ddtune.report.render.markdown import render_markdown
from ddtune.report.render.plots import Plot, write_plots

__all__ = [
    "Document",
    "Plot",
    "Section",
    "render_html",
    "render_markdown",
    "write_plots",
]
