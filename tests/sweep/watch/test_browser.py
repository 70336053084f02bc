"""`ddtune sweep watch` in a real headless Chromium (Debian's chromium + chromium-driver,
driven by selenium) during a running race on the bundled models — a shortened copy of
examples/demo-hot.toml: the page updates itself between two screenshots, the key
elements are there, the browser console has no errors, and once the runner is stopped
the same page (not reloaded) says the sweep was interrupted.

Needs: apt-get install chromium chromium-driver; the test extras (selenium).
Set DDTUNE_WATCH_SHOTS=DIR to keep the two screenshots.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

DEMO_HOT = Path(__file__).parents[3] / "examples" / "demo-hot.toml"
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
SHORTER = {  # the demo race, smaller: 4 configs + AR, 2-4 passes, one prompt per workload
    r"topk = \[4, 8\]": "topk = [4]",
    r"min_repeats = 3 ": "min_repeats = 2 ",
    r"repeats = 30 ": "repeats = 4 ",
    r"n_prompts = 2": "n_prompts = 1",
    r"max_tokens = 128": "max_tokens = 48",
    r"limit = 2 ": "limit = 1 ",
}

pytestmark = [
    pytest.mark.slow,  # a hot `ddtune serve`, a race and a browser: 1-3 min on 2 cores
    pytest.mark.skipif(
        CHROMIUM is None or DRIVER is None,
        reason="needs Debian's chromium and chromium-driver (apt-get install chromium-driver)",
    ),
]


def short_demo(folder: Path, port: int) -> Path:
    text = DEMO_HOT.read_text()
    for pattern, new in {**SHORTER, r"port = 18732": f"port = {port}"}.items():
        text, n = re.subn(pattern, new, text)
        assert n >= 1, pattern
    path = folder / "demo-hot-short.toml"
    path.write_text(text)
    return path


@pytest.fixture
def browser() -> Iterator:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM or ""
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,800"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def watcher() -> Iterator[Callable[[Path], str]]:
    started: list[subprocess.Popen[str]] = []

    def start(store: Path) -> str:
        argv = [sys.executable, "-m", "ddtune.cli", "sweep", "watch", "--store", str(store)]
        proc = subprocess.Popen(
            [*argv, "--port", "0", "--interval", "1"], stdout=subprocess.PIPE, text=True
        )
        started.append(proc)
        assert proc.stdout is not None
        return proc.stdout.readline().split(" at ")[1].split()[0]

    yield start
    for proc in started:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def wait_for(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.5)


def text_of(driver, element_id: str) -> str:  # noqa: ANN001
    """The element's text in one step (the page swaps its live part in at any moment)."""
    script = "const e = document.getElementById(arguments[0]); return e ? e.innerText : '';"
    return str(driver.execute_script(script, element_id))


def trials_done(driver) -> int:  # noqa: ANN001
    found = re.search(r"(\d+) done", text_of(driver, "now"))
    return int(found.group(1)) if found else 0


def test_the_live_page_follows_a_running_race(browser, watcher, runners, port, tmp_path) -> None:  # noqa: ANN001
    store = tmp_path / "runs" / "store.sqlite"
    runner = runners.start(short_demo(tmp_path, port), store)
    wait_for("the runner created its store", store.is_file, 120)
    browser.get(watcher(store))
    wait_for("a first finished trial", lambda: trials_done(browser) >= 1, 240)
    first, done = browser.get_screenshot_as_png(), trials_done(browser)
    wait_for("the page updated itself", lambda: trials_done(browser) >= done + 2, 180)
    second = browser.get_screenshot_as_png()
    _keep(first, second, tmp_path)
    assert _changed_pixels(first, second, tmp_path) > 500

    for section in ("now", "answer-so-far", "configurations", "race-so-far", "failures"):
        assert text_of(browser, section).strip(), section
    rows = "return document.querySelectorAll('#configurations tbody tr').length;"
    assert browser.execute_script(rows) == 5  # 4 configs + AR
    now = text_of(browser, "now")
    assert "running (runner pid" in now and "ETA: about" in now, now
    assert text_of(browser, "bar").startswith("live: updated")

    runner.send_signal(signal.SIGINT)
    assert runner.wait(timeout=120) == 3
    wait_for(
        "the page said the sweep was interrupted",
        lambda: "interrupted" in text_of(browser, "now"),
        30,
    )
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors


def _changed_pixels(first: bytes, second: bytes, folder: Path) -> int:
    (folder / "first.png").write_bytes(first)
    (folder / "second.png").write_bytes(second)
    a, b = image.imread(folder / "first.png"), image.imread(folder / "second.png")
    assert a.shape[:2] == (800, 1280) or a.shape[1] == 1280, a.shape
    return int(np.abs(a - b).max(axis=2).__gt__(0.1).sum())


def _keep(first: bytes, second: bytes, folder: Path) -> None:
    keep = os.environ.get("DDTUNE_WATCH_SHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / "watch-1.png").write_bytes(first)
        (Path(keep) / "watch-2.png").write_bytes(second)
