"""The HTML report opens in headless Chromium and its screenshot shows the plots."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

from ddtune.report import ReportOptions, build_report

CHROMIUM = shutil.which("chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian chromium is not installed (apt-get install chromium)"
)


def screenshot(html: Path, png: Path, profile: Path) -> np.ndarray:
    """Render `html` at 1280x2000 and return the screenshot as an RGB array in [0, 1]."""
    argv = [
        CHROMIUM,
        *FLAGS,
        f"--user-data-dir={profile}",
        f"--screenshot={png}",
        "--window-size=1280,2000",
        html.resolve().as_uri(),
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # chromium and its helper processes
        proc.communicate()
        pytest.fail("chromium did not finish the screenshot within 120 s")
    assert png.exists(), (
        f"chromium wrote no screenshot (exit {proc.returncode}): {output[-2000:]!r}"
    )
    return image.imread(png)[:, :, :3]


def saturated(pixels: np.ndarray) -> np.ndarray:
    """Mask of clearly coloured pixels: plot lines and markers, not grey text or tables."""
    return (pixels.max(axis=2) - pixels.min(axis=2)) > 0.35


def test_screenshot_shows_the_plots(synth, tmp_path):
    records = synth.make_records(synth.standard_effects(), repeats=3)
    build_report(records, tmp_path / "with")
    build_report(records, tmp_path / "without", ReportOptions(plots=False))
    shot = screenshot(
        tmp_path / "with" / "report.html", tmp_path / "with.png", tmp_path / "profile1"
    )
    bare = screenshot(
        tmp_path / "without" / "report.html", tmp_path / "without.png", tmp_path / "profile2"
    )
    assert shot.shape[:2] == (2000, 1280)
    assert len(np.unique(shot.reshape(-1, 3), axis=0)) > 200  # not blank
    colour = saturated(shot)
    colours_in_plots = np.unique(shot[colour], axis=0)
    assert colour.sum() > 2000 and len(colours_in_plots) > 30
    assert saturated(bare).sum() < 100  # the same page without plots has (almost) no colour
    rows = np.nonzero(colour.any(axis=1))[0]
    assert rows.min() > 300  # the coloured region starts below the recommendations and tables
