"""The HTML report opens in headless Chromium: its screenshot shows the plots, and its first
screen (1280x800) shows the answer."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

from ddtune.records import SweepContext
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


PROBE = """<script>
const box = (css) => { const e = document.querySelector(css); if (!e) return null;
  const r = e.getBoundingClientRect(); return [r.top, r.bottom, r.left, r.right]; };
const out = document.createElement("pre"); out.id = "probe";
out.textContent = JSON.stringify({lead: box(".lead"), status: box(".lead .status"),
  command: box("section.answer pre"), view: [innerWidth, innerHeight]});
document.body.appendChild(out);
</script>"""


def test_the_first_screen_shows_the_answer(synth, tmp_path):
    """At 1280x800 in real Chromium, the answer's first line, its status and the command
    that applies it are laid out inside the first screen."""
    context = SweepContext(store="runs/demo/store.sqlite")
    build_report(synth.make_records(synth.standard_effects(), 3), tmp_path, context=context)
    page = tmp_path / "probe.html"  # the report plus a script that measures the layout
    page.write_text((tmp_path / "report.html").read_text().replace("</body>", PROBE + "</body>"))
    argv = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom"]
    done = subprocess.run(
        [*argv, "--window-size=1280,800", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, start_new_session=True,
    )  # fmt: skip
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout)
    assert found, done.stderr[-2000:]
    layout = json.loads(html.unescape(found.group(1)))
    assert layout["view"][0] == 1280  # laid out 1280 wide; the first screen: its top 800 px
    for part in ("lead", "status", "command"):
        top, bottom, left, right = layout[part]
        assert top > 0 and bottom < 800 and left >= 0 and right <= 1280, (part, layout)
