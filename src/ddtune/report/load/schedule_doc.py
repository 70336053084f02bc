"""The "Schedule" section of the report document (after "Load levels"), and `schedule.json`.

The section: the schedule's sentence (the config per range of concurrent
requests and its gain over the best single config on the load mix, or one
config said as such), a table of the ranges, how each engine takes it, and
the notes. `schedule.json` is `report.schedule` alone, for
`ddtune serve --schedule` (which also reads results.json).
See docs/load.md "The best config per batch size".
"""

from __future__ import annotations

import json
from pathlib import Path

from ddtune.engines.schedule import span
from ddtune.report.load.document import TITLE as LOAD_TITLE
from ddtune.report.load.schedule import ScheduleReport
from ddtune.report.render.atomic import write_atomic
from ddtune.report.render.document import Block, Bullets, Cell, Document, Paragraph, Section, Table

TITLE = "Schedule"


def add_schedule_section(document: Document, found: ScheduleReport | None) -> None:
    """Insert the section after "Load levels" (or at the end)."""
    if found is None:
        return
    titles = [s.title for s in document.sections]
    at = titles.index(LOAD_TITLE) + 1 if LOAD_TITLE in titles else len(titles)
    document.sections.insert(at, schedule_section(found))


def schedule_section(found: ScheduleReport) -> Section:
    rows: list[list[Cell]] = []
    for first, last, tier in found.schedule.ranges():
        rows.append(
            [span(first, last), tier.label(), json.dumps(tier.config_wire(), sort_keys=True)]
        )
    levels = ", ".join(f"{level}: {label}" for level, label in found.picks.items())
    blocks: list[Block] = [
        Paragraph(found.text),
        Table(["concurrent requests", "config", "config (results.json)"], rows),
        Paragraph(f"Recommended per measured level: {levels}."),
        Bullets(found.engines),
    ]
    if found.notes:
        blocks.append(Bullets(found.notes, warning=True))
    return Section(TITLE, blocks)


def write_schedule_json(found: ScheduleReport, path: Path) -> None:
    write_atomic(path, json.dumps({"schedule": found.schedule.to_wire()}, indent=2) + "\n")


__all__ = ["add_schedule_section", "schedule_section", "write_schedule_json"]
