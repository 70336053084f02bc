"""Slow: vLLM's own parser and SpeculativeConfig validation as the engine check (no model loaded).

`.venv-vllm` is built on first use (`vllm_setup.py`). One vLLM process checks the launch
commands of examples/vllm-ngram-cpu.toml with the speculative config as a user variable:
ngram K=3 and dflash with the bundled drafter K=7 accepted; dflash K=0 and an unknown
method refused by SpeculativeConfig's validation, each naming `--speculative-config`
and the variable behind it; then a misspelled flag refused by vLLM's argument parser.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from ddtune.params import DecodeParams
from ddtune.services import ServiceSpec
from ddtune.services.engine_check import PlannedLaunch, check_launches
from ddtune.sweep.plan import read_spec

sys.path.insert(0, str(Path(__file__).parent))
from vllm_setup import REPO, ensure_vllm_venv  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]
EXAMPLE = REPO / "examples" / "vllm-ngram-cpu.toml"
DRAFTER = "src/ddtune/assets/models/drafter"
CONFIGS = {
    "ngram K=3": {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3},
    "dflash K=7": {"method": "dflash", "model": DRAFTER, "num_speculative_tokens": 7},
    "dflash K=0": {"method": "dflash", "model": DRAFTER, "num_speculative_tokens": 0},
    "bogus K=3": {"method": "bogus", "num_speculative_tokens": 3},
}


def service(extra: list[str]) -> ServiceSpec:
    """The example's service with the whole speculative config as the variable `sc`."""
    table = read_spec(EXAMPLE).service.to_dict()
    command = list(table["command"])
    command[command.index("--speculative-config") + 1] = "{sc}"
    table["command"] = command + extra
    table["vars"] = {**table["vars"], "sc": "{}"}
    return ServiceSpec.from_dict(table)


def launches() -> list[PlannedLaunch]:
    return [
        PlannedLaunch(label, DecodeParams("ar"), {"sc": json.dumps(config), "K": 1})
        for label, config in CONFIGS.items()
    ]


def test_vllm_checks_its_own_speculative_configs(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # the example's cwd and paths are the repository root's
    ensure_vllm_venv()
    started = time.monotonic()
    report = check_launches(service([]), launches(), tmp_path)
    print(f"\n{report.summary()} (wall {time.monotonic() - started:.1f} s)")
    print("\n".join(report.lines()[1:]))
    assert report.engine is not None and report.engine.name().startswith("vLLM 0.32")
    refused = {r.label: r for r in report.refusals}
    assert sorted(refused) == ["bogus K=3", "dflash K=0"]  # ngram K=3, dflash K=7 accepted
    for refusal in refused.values():
        assert (refusal.stage, refusal.flag, refusal.parameter) == (
            "engine",
            "--speculative-config",
            "vars.sc",
        )
        assert refusal.message.startswith(
            "ValidationError: 1 validation error for SpeculativeConfig"
        )
    assert "greater than 0" in refused["dflash K=0"].message
    assert "Input should be 'ngram'" in refused["bogus K=3"].message
    # the bundled drafter reads the target's last layer: one note for the accepted dflash
    assert len(report.warnings) == 1 and "before the final norm" in report.warnings[0]

    report = check_launches(service(["--max-num-seqz", "4"]), launches()[:1], tmp_path)
    assert [r.line() for r in report.refusals] == [
        f"ngram K=3: service.command (--max-num-seqz): {report.engine.name()} refused it at "
        "argparse: unrecognized arguments: --max-num-seqz"
    ]
