"""Load levels in the report: figures per (config, level), decisions per level, findings.

`figures` (per level over the repeats), `per_level` (one recommendation per
level and one for `load_weights`), `findings` (the AR/DFlash/DDTree crossover
and serialisation), `document` (the "Load levels" section and
`load_levels.csv`), `plots` (PNG). See docs/load.md.
"""

from ddtune.report.load.document import add_load_section, write_load_csv
from ddtune.report.load.figures import LevelFigures, LoadReport
from ddtune.report.load.per_level import analyze_load
from ddtune.report.load.plots import write_load_plots

__all__ = [
    "LevelFigures",
    "LoadReport",
    "add_load_section",
    "analyze_load",
    "write_load_csv",
    "write_load_plots",
]
