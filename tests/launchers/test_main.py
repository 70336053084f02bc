"""`python -m ddtune.launchers`: --print output, and exec into the engine under the same PID.

The engine is the FAKE sglang of tests/engines/fixtures/fake_sglang (SGLang itself
needs a GPU): the launcher asks its parser for the window flag, then execs its
`launch_server`, which reports its argv, PID and DDTree variables.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

FAKE_SGLANG = Path(__file__).parents[1] / "engines" / "fixtures" / "fake_sglang"


def run_launcher(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ddtune.launchers", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def sglang_ddtree(budget: int, topk: int, window: str) -> list[str]:
    """`sglang` launcher options for one DDTree configuration (model /m, drafter /d)."""
    options = ["--model-path", "/m", "--draft-model-path", "/d", "--mode", "ddtree"]
    return ["sglang", *options, "--budget", str(budget), "--topk", str(topk), "--window", window]


def test_print_shows_env_and_argv():
    done = run_launcher([*sglang_ddtree(12, 4, "none"), "--python", "python3", "--print"])
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout)
    assert words[0] == "SGLANG_DDTREE_MAX_TOPK=4"
    assert words[1:4] == ["python3", "-m", "sglang.launch_server"]
    assert words[words.index("--speculative-ddtree-budget") + 1] == "12"
    assert not [w for w in words if "window" in w]


def test_vllm_print_has_compact_speculative_json():
    done = run_launcher(
        [
            "vllm",
            "--model",
            "/m",
            "--method",
            "ngram",
            "--num-speculative-tokens",
            "3",
            "--prompt-lookup-max",
            "3",
            "--cpu-kvcache-gib",
            "1",
            "--python",
            "python3",
            "--print",
        ]
    )
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout)
    config = json.loads(words[words.index("--speculative-config") + 1])
    assert config == {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}
    assert "VLLM_CPU_KVCACHE_SPACE=1" in words


def test_bad_options_exit_2_with_one_line():
    done = run_launcher(["sglang", "--model-path", "/m", "--mode", "ddtree", "--print"])
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "needs a drafter" in done.stderr


def test_a_window_flag_the_engine_does_not_know_is_one_clear_line():
    """The window flag comes from the engine's own parser: an engine without one refuses."""
    done = run_launcher(
        [*sglang_ddtree(8, 4, "64"), "--python", sys.executable, "--print"],
        env={**os.environ, "PYTHONPATH": "/nonexistent"},
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "cannot read the sglang options" in done.stderr
    assert "No module named 'sglang'" in done.stderr


def test_exec_replaces_the_launcher_with_the_engine():
    env = {
        **os.environ,
        "PYTHONPATH": f"{FAKE_SGLANG}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ddtune.launchers",
            *sglang_ddtree(8, 6, "2048"),
            "--depth-bonus",
            "0.5",
            "--port",
            "30123",
            "--",
            "--mem-fraction-static",
            "0.8",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    seen = json.loads(out)
    assert seen["pid"] == proc.pid  # same process: controllers see the engine itself
    assert seen["env"] == {"SGLANG_DDTREE_MAX_TOPK": "6", "SGLANG_DDTREE_DEPTH_BONUS": "0.5"}
    argv = seen["argv"]
    assert argv[argv.index("--speculative-algorithm") + 1] == "DDTREE"
    assert argv[argv.index("--speculative-draft-window-size") + 1] == "2048"  # its parser's
    assert argv[argv.index("--port") + 1] == "30123"
    assert argv[-2:] == ["--mem-fraction-static", "0.8"]
