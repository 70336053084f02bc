"""forest.png (each config's ratio to the baseline, sorted) and race.png (eliminations by pass)."""

from __future__ import annotations

import numpy as np
from matplotlib import image

from ddtune.records import Elimination, SweepContext
from ddtune.report import build_report

RACE = SweepContext(
    "race",
    race=True,
    passes=4,
    stop="one_left",
    exits=[
        Elimination("dflash wnone", 2, "worse", "slower than the leader"),
        Elimination("ddtree b8 k2 wnone", 3, "pass_rate", "pass rate below the best"),
    ],
)


def test_a_race_gets_a_forest_and_a_race_plot(synth, tmp_path) -> None:  # noqa: ANN001
    summary = build_report(synth.make_records(synth.standard_effects(), 4), tmp_path, context=RACE)
    names = [p.name for p in summary.plots]
    assert names[:2] == ["forest.png", "race.png"]
    for name in names[:2]:
        pixels = image.imread(tmp_path / name)
        assert pixels.shape[0] > 150 and len(np.unique(pixels.reshape(-1, 4), axis=0)) > 50
    markdown = (tmp_path / "report.md").read_text()
    assert markdown.index("(forest.png)") < markdown.index("## Recommendations")
    assert markdown.index("## Race") < markdown.index("(race.png)") < markdown.index("## Plots")


def test_a_grid_has_no_race_plot_and_no_baseline_no_forest(synth, tmp_path) -> None:  # noqa: ANN001
    records = synth.make_records(synth.standard_effects(), 3)
    grid = build_report(records, tmp_path / "grid")
    assert "race.png" not in [p.name for p in grid.plots]
    for record in records:
        record.is_baseline = False
    bare = build_report(records, tmp_path / "bare")
    assert "forest.png" not in [p.name for p in bare.plots]
    assert any(note.startswith("forest plot: no ratio") for note in bare.skipped_plots)
