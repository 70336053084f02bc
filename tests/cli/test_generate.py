"""The CLI: `ddtune generate` (text and `--json`) and its errors, on random checkpoints."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ddtune.cli import build_parser, main
from ddtune.ddtree.testing import write_random_checkpoint
from ddtune.errors import UserError


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    return write_random_checkpoint(tmp_path_factory.mktemp("cli"), seed=5)


def test_generate_json_matches_ar_and_reports_stats(model_dirs, capsys):
    target, drafter = model_dirs
    base = [
        "generate",
        "--target",
        str(target),
        "--drafter",
        str(drafter),
        "--threads",
        "1",
        "--prompt",
        "def f(x):",
        "--max-tokens",
        "12",
        "--ignore-eos",
        "--json",
    ]
    assert main([*base, "--mode", "ar"]) == 0
    ar = json.loads(capsys.readouterr().out)
    assert main([*base, "--mode", "ddtree", "--budget", "8", "--topk", "2", "--window", "4"]) == 0
    tree = json.loads(capsys.readouterr().out)
    assert tree["token_ids"] == ar["token_ids"] and len(ar["token_ids"]) == 12
    assert isinstance(tree["text"], str)
    assert tree["stats"]["mean_acceptance_length"] >= 1.0
    assert set(tree["stats"]["stage_seconds"]) == {"draft", "tree", "verify", "commit"}


def test_generate_errors_are_one_line(model_dirs, tmp_path):
    target, drafter = model_dirs
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ddtune.cli",
            "generate",
            "--target",
            str(tmp_path / "nope"),
            "--drafter",
            str(drafter),
            "--prompt",
            "x",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "does not exist" in proc.stderr


@pytest.mark.parametrize(
    "flags, key",
    [
        (["--budget", "-1"], "budget"),
        (["--topk", "0"], "topk"),
        (["--window", "0"], "window"),
        (["--max-tokens", "0"], "max_new_tokens"),
        (["--top-p", "1.5"], "top_p"),
        (["--temperature", "-1"], "temperature"),
    ],
)
def test_generate_bad_flags_are_user_errors_naming_the_key(model_dirs, flags, key):
    target, drafter = model_dirs
    args = build_parser().parse_args(
        ["generate", "--target", str(target), "--drafter", str(drafter), "--prompt", "x", *flags]
    )
    with pytest.raises(UserError) as caught:
        args.func(args)
    assert caught.value.key == key
