"""The `ddtune` front (`ddtune.cli.main`): output cut by a closed pipe (`| head`) ends quietly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddtune.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """`ddtune sweep plan SPEC | head -0`: the reader is gone before the first line."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    argv = [sys.executable, "-m", "ddtune.cli", "sweep", "plan", "examples/demo.toml"]
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # as `head` does once it has read enough
    err = proc.stderr.read().decode()
    assert proc.wait() == 141  # 128 + SIGPIPE, as a shell tool cut off by its reader
    assert err == ""  # no BrokenPipeError traceback, no "Exception ignored"


def test_a_broken_pipe_that_is_not_standard_output_is_still_an_error(monkeypatch, capsys):
    """Only the reader of standard output going away is quiet; another pipe's error is not."""

    def broken(args):  # noqa: ANN001
        raise BrokenPipeError("the engine's parser went away")

    monkeypatch.setattr("ddtune.cli.sweep.cmd_status", broken)
    monkeypatch.setattr("ddtune.cli.stdout_gone", lambda: False)
    with pytest.raises(BrokenPipeError):
        main(["sweep", "status"])
